"""Mutated queries for the parser's fuzz test (tests/test_fuzz.py) and its larger run
(benchmarks/fuzz_queries.py): seeds are the queries written in the tests, the docs and
the engines' examples; each mutation edits one seed at random, by characters or tokens,
including the shapes that crashed the parser once (issue 10.4): deep parentheses, long
chains of AND/OR/+, NOT NOT ..., huge numbers and windows."""

from __future__ import annotations

import ast
import random
import re
import time
from collections import Counter
from pathlib import Path

from sparkcep.engines.registry import compile_jobs, engines
from sparkcep.errors import QueryError
from sparkcep.plan import Options, plan_queries

ROOT = Path(__file__).resolve().parent.parent
_START = re.compile(r"^\s*(PATTERN|QUERY|RULE|EPISODE|FUNNEL|SELECT)\b", re.IGNORECASE)

SCHEMA = {
    "ts": "int",
    "type": "string",
    "v": "float",
    "x": "int",
    "k": "int",
    "value": "float",
    "price": "float",
    "name": "string",
    "flag": "bool",
}
OPTIONS = Options(time_unit="ms")

TOKENS = (
    "(", ")", "[", "]", "{", "}", ",", ";", ":", ".", "+", "-", "*", "/", "%", "!",
    "=", "==", "!=", "<>", "<", "<=", ">", ">=", "->", "AND", "OR", "NOT", "IN",
    "NOT IN", "LIKE", "BETWEEN", "SEQ", "ANY", "WHERE", "WITHIN", "RETURN", "AS",
    "STRATEGY", "SKIP_TILL_ANY_MATCH", "STRICT_CONTIGUITY", "GROUP BY", "ORDER BY",
    "AGG", "SELECT ALL", "INCLUSIVE", "MISSING RATE", "DELAY", "THRESHOLD", "TIME BETWEEN",
    "PATTERN", "QUERY q:", "RULE r:", "EPISODE", "PREDICT", "CONFIDENCE", "SYMBOL",
    "a", "b", "c", "a.v", "b.x", "c.k", "x", "count(b)", "sum(b.v)", "prev(b.v)",
    "abs(", "0", "1", "-1", "1.5", "1e400", "1e-400", "9223372036854775807",
    "9223372036854775808", "18446744073709551616", "1" + "0" * 400, "9" * 5000,
    "'s'", '"t"', "'", '"', "`", "`q w`", "TRUE", "FALSE", "NULL", "s", "ms", "min",
    "days", "fortnights", "--", "//", "\n", "\t", "é", "\x00", "∑",
)  # fmt: skip

DEEP = (
    lambda n: "(" * n + "a.v" + ")" * n,
    lambda n: " AND ".join(["a.v > 1"] * n),
    lambda n: " OR ".join(["a.v > 1"] * n),
    lambda n: "a.v" + " + 1" * n,
    lambda n: "NOT " * n + "a.v > 1",
    lambda n: "-" * n + "a.v",
    lambda n: "abs(" * n + "a.v" + ")" * n,
    lambda n: "a.v = " * n + "b.v",
)


def seeds() -> list[str]:
    """The queries written in tests/*.py (string constants that start like a query),
    in docs/*.md (code lines that do) and in the engines' examples; sorted, unique."""
    found: set[str] = set()
    for path in sorted((ROOT / "tests").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            text = node.value if isinstance(node, ast.Constant) else None
            if isinstance(text, str) and _START.match(text) and len(text) < 2000:
                found.add(text)
    for path in sorted((ROOT / "docs").glob("*.md")):
        for block in re.findall(r"```[a-z]*\n(.*?)```", path.read_text(), re.DOTALL):
            if _START.match(block):
                found.add(block)
    ENGINES = engines()
    for engine in ENGINES.values():
        found.update(engine.examples)
    return sorted(found)


def _tokens(text: str) -> list[str]:
    return re.findall(r"\s+|\w+|'[^']*'|\"[^\"]*\"|`[^`]*`|.", text)


def mutate(rng: random.Random, text: str, pool: list[str]) -> str:
    """One to three random edits of `text` (one, most often)."""
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        text = _edit(rng, text, pool)
    return text


def _edit(rng: random.Random, text: str, pool: list[str]) -> str:
    toks = _tokens(text) or [""]
    i = rng.randrange(len(toks))
    j = min(len(toks), i + rng.randint(1, 4))
    kind = rng.randrange(10)
    if kind == 0:  # delete tokens
        return "".join(toks[:i] + toks[j:])
    if kind == 1:  # insert a token
        return "".join([*toks[:i], " ", rng.choice(TOKENS), " ", *toks[i:]])
    if kind == 2:  # replace a token
        return "".join([*toks[:i], rng.choice(TOKENS), *toks[i + 1 :]])
    if kind == 3:  # duplicate a run of tokens
        return "".join(toks[:j] + toks[i:j] + toks[j:])
    if kind == 4:  # swap two tokens
        k = rng.randrange(len(toks))
        toks[i], toks[k] = toks[k], toks[i]
        return "".join(toks)
    if kind == 5:  # a deep or long expression where a token was
        shape = rng.choice(DEEP)(rng.choice((2, 50, 99, 101, 250, 1000)))
        return "".join([*toks[:i], " ", shape, " ", *toks[i + 1 :]])
    if kind == 6:  # a number made huge, tiny or odd
        numbers = [n for n, t in enumerate(toks) if t.isdigit()]
        n = rng.choice(numbers) if numbers else i
        toks[n] = rng.choice(("1e400", "1" + "0" * 400, "9" * 5000, "0", "0.0", "1e-400"))
        return "".join(toks)
    if kind == 7:  # splice with another seed
        other = _tokens(rng.choice(pool))
        k = rng.randrange(len(other) + 1)
        return "".join(toks[:i] + other[k:])
    if kind == 8:  # truncate
        return text[: rng.randrange(len(text) + 1)]
    # a random character changed
    pos = rng.randrange(len(text) + 1)
    return text[:pos] + chr(rng.randrange(32, 0x250)) + text[pos + 1 :]


def outcome(text: str, schema) -> str:
    """'ok', or 'QueryError'; anything else escapes (the test's failure). A QueryError
    that does not point at a line and column is reported as AssertionError, and so is a
    query planned against `schema` whose programs read a column it does not have (the
    run would fail reading its events)."""
    try:
        plans, names = plan_queries(text, schema, OPTIONS)
    except QueryError as error:
        if error.line < 1 or error.column < 1:
            raise AssertionError(f"QueryError without a position: {error}") from error
        return "QueryError"
    try:  # (a query file's queries that cannot run together: an error of the file)
        programs = compile_jobs(plans, names, OPTIONS) if schema is not None else []
    except QueryError:
        return "QueryError"
    for program in programs:
        if missing := set(program.columns()) - set(schema):
            raise AssertionError(f"the programs read columns not in the input: {missing}")
    return "ok"


def run(count: int, seed: int) -> tuple[Counter, list[tuple[str, str]], tuple[float, str]]:
    """Plan `count` mutated queries (every other one against SCHEMA, the rest without a
    schema). Returns the outcome counts, the queries that raised anything else than a
    positioned QueryError (with the exception), and the slowest plan (seconds, query)."""
    pool = seeds()
    rng = random.Random(seed)
    counts: Counter = Counter()
    crashes: list[tuple[str, str]] = []
    slowest = (0.0, "")
    for n in range(count):
        text = mutate(rng, rng.choice(pool), pool)
        start = time.perf_counter()
        try:
            counts[outcome(text, SCHEMA if n % 2 else None)] += 1
        except Exception as error:  # what the fuzz test counts as a crash
            counts[type(error).__name__] += 1
            crashes.append((text, f"{type(error).__name__}: {error}"))
        seconds = time.perf_counter() - start
        if seconds > slowest[0]:
            slowest = (seconds, text)
    return counts, crashes, slowest
