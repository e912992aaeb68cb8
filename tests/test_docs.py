"""Every example in README.md, docs/ and the examples' READMEs runs (a doc that is false is
worse than none). A query block must plan, a `sparkcep ...` command line must parse against the
CLI (its options exist, its values have their types), and a Python block runs, with
`spark` given and the repository's `examples/` beside it."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer

from sparkcep.cli import app
from sparkcep.language.parser import parse_file
from sparkcep.plan import Options
from sparkcep.plan.analyzer import plan_queries
from sparkcep.plan.match_recognize import (
    analyze_match_recognize,
    is_match_recognize,
    query_options,
)

# typer ships click inside it; its usage error is the base of typer.BadParameter.
UsageError = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")
ROOT = Path(__file__).parent.parent
PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "examples").glob("*/README.md")),
]
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)
QUERY_START = re.compile(
    r"^(\s*--[^\n]*\n)*\s*((QUERY|RULE)\s+\w+\s*:\s*)?(PATTERN|FUNNEL|EPISODE)\b", re.I
)


def _blocks():
    for page in PAGES:
        text = page.read_text()
        for m in FENCE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            yield f"{page.relative_to(ROOT)}:{line}", m.group(1), m.group(2)


BLOCKS = list(_blocks())
QUERIES = [
    (where, body)
    for where, lang, body in BLOCKS
    if lang in ("", "sql", "cep") and (QUERY_START.match(body) or is_match_recognize(body))
]
PYTHON = [(where, body) for where, lang, body in BLOCKS if lang == "python"]
COMMANDS = [
    (where, command)
    for where, lang, body in BLOCKS
    if lang in ("", "sh", "bash", "console")
    for command in re.sub(r"\\\n\s*", " ", body).splitlines()
    if command.strip().startswith("sparkcep ")
]


def test_the_pages_have_examples_of_each_kind():
    assert len(QUERIES) >= 20 and len(PYTHON) >= 4 and len(COMMANDS) >= 10


@pytest.mark.parametrize(("where", "text"), QUERIES, ids=[w for w, _ in QUERIES])
def test_every_query_in_the_docs_plans(where, text):
    if is_match_recognize(text):
        plan = analyze_match_recognize(text, None, query_options(text, Options()))
        assert plan.spec is not None
        return
    if "USING MODEL" in text.upper():  # names a model file `sparkcep fit` writes: parsed only
        assert parse_file(text)
        return
    plans, _ = plan_queries(text, None, Options())
    assert plans


@pytest.mark.parametrize(("where", "command"), COMMANDS, ids=[w for w, _ in COMMANDS])
def test_every_command_in_the_docs_parses(where, command):
    words = shlex.split(command, comments=True)[1:]
    cli = typer.main.get_command(app)
    try:
        context = cli.make_context("sparkcep", list(words))
        # the subcommand's name is held apart from its arguments (an attribute click renamed)
        held = getattr(context, "_protected_args", None) or context.protected_args
        name, sub, rest = cli.resolve_command(context, [*held, *context.args])
        sub.make_context(name, rest, parent=context)
    except typer.Exit:  # an option that acts as it is read (--version): it parsed
        pass
    except UsageError as e:
        pytest.fail(f"{where}: `{command.strip()}`: {e.format_message()}")


@pytest.mark.parametrize(("where", "code"), PYTHON, ids=[w for w, _ in PYTHON])
def test_every_python_example_runs(where, code, spark, tmp_path, monkeypatch):
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    monkeypatch.chdir(tmp_path)
    namespace = {"spark": spark, "__name__": "docs_example"}
    # Each example asserts what it shows, so a wrong answer fails here, not only a crash.
    assert re.search(r"^assert ", code, re.M), f"{where}: the example checks nothing"
    exec(compile(code, where, "exec"), namespace)


def test_the_api_page_says_each_option_with_its_flag_and_default():
    """Each option of `Options` (the one table the functions and flags are made from) has
    its row in docs/api.md: its flag, its keyword and, where it has one, its default."""
    from sparkcep.plan.model import OPTIONS, PUBLIC_OPTIONS

    rows = [r for r in (ROOT / "docs" / "api.md").read_text().splitlines() if r.startswith("|")]
    for name in PUBLIC_OPTIONS:
        row = next((r for r in rows if f"| `{name}`" in r), None)
        assert row is not None, f"docs/api.md has no row for `{name}`"
        assert f"| `{OPTIONS[name].metadata['flag']}" in row, row
        default = OPTIONS[name].default
        assert default is None or f"default `{default}`" in row, row


def test_the_api_page_lists_every_option_and_keyword():
    """docs/api.md pairs each CLI option with its Python keyword: a new option or keyword
    that is not on the page fails here."""
    import inspect

    import sparkcep

    page = (ROOT / "docs" / "api.md").read_text()
    cli = typer.main.get_command(app)
    options = {
        opt
        for command in ("run", "explain", "stream")
        for param in cli.commands[command].params
        for opt in param.opts
        if opt.startswith("--")
    }
    missing = sorted(o for o in options if f"`{o}" not in page)
    assert not missing, f"docs/api.md lacks {missing}"
    functions = ["match", "match_local", "aggregate", "aggregate_local", "run_local", "stream"]
    functions += ["explain", "match_recognize", "match_recognize_local"]
    arguments = {"df", "events", "queries", "query", "streaming_df", "data"}
    keywords = {
        name
        for f in functions
        for name in inspect.signature(getattr(sparkcep, f)).parameters
        if name not in arguments
    }
    missing = sorted(k for k in keywords if f"`{k}`" not in page)
    assert not missing, f"docs/api.md lacks the keywords {missing}"


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """The anchor a heading gets on GitHub: lower case, punctuation dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_in_the_docs_points_to_a_file_that_exists():
    """A relative link in README.md, docs/, the examples' READMEs or the benchmark pages
    names a file or folder of the repository, and its `#anchor` a heading of that page."""
    pages = [*PAGES, *sorted((ROOT / "benchmarks" / "results").glob("*.md"))]
    broken = []
    for page in pages:
        text = FENCE.sub("", page.read_text())
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(ROOT)}: {target}"
            if not file.exists():
                broken.append(where)
            elif anchor and file.suffix == ".md":
                headings = re.findall(r"^#+\s+(.*)$", FENCE.sub("", file.read_text()), re.M)
                if anchor not in {_slug(h) for h in headings}:
                    broken.append(where)
    assert not broken, f"links to nothing: {broken}"


def test_no_page_or_module_cites_an_issue():
    """Users read the docs and the modules' docstrings: they say what and why, never an
    issue number (those live in benchmarks/results/)."""
    texts = [*PAGES, *sorted((ROOT / "src").rglob("*.py"))]
    cites = [
        f"{path.relative_to(ROOT)}: {m.group(0)}"
        for path in texts
        for m in re.finditer(r"\bissues? #?\d+", path.read_text(), re.I)
    ]
    assert not cites, f"issue numbers: {cites}"
