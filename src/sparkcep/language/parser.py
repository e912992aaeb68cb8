"""Query text -> `Query` dataclasses, with syntax errors that point at line and column."""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, replace
from functools import cache, lru_cache
from importlib.resources import files

from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from sparkcep.errors import QueryError
from sparkcep.language import ast
from sparkcep.timeunits import UNITS

CLAUSE_FIELDS = {
    "where_clause": "WHERE",
    "strategy_clause": "STRATEGY",
    "within_clause": "WITHIN",
    "order_clause": "ORDER BY",
    "return_clause": "RETURN",
    "group_clause": "GROUP BY",
    "agg_clause": "AGG",
    "missing_clause": "MISSING RATE",
    "delay_clause": "DELAY",
    "threshold_clause": "THRESHOLD",
    "model_clause": "USING MODEL",
    "select_clause": "SELECT",
    "inclusive_clause": "INCLUSIVE",
    "symbol_clause": "SYMBOL",
    "predict_clause": "PREDICT",
    "confidence_clause": "CONFIDENCE",
    "time_clause": "TIME",
    "skip_clause": "AFTER MATCH SKIP",
    "timeouts_clause": "OUTPUT TIMEOUTS",
    "emit_clause": "EMIT",
}


@cache
def _lark() -> Lark:
    grammar = files("sparkcep.language").joinpath("sparkcep.lark").read_text()
    return Lark(
        grammar, parser="lalr", propagate_positions=True, maybe_placeholders=True,
        cache=_lark_cache(),
    )  # fmt: skip


def _lark_cache() -> str | bool:
    """Where Lark keeps the built parser between processes (building it costs ~0.2 s of
    every command's start): the user's cache folder. Lark checks the grammar's hash on
    load and rebuilds when it changed; False (no cache) when the folder is not writable."""
    import os

    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    folder = os.path.join(root, "sparkcep")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
    except OSError:
        return False
    if not os.access(folder, os.W_OK):
        return False
    import lark

    return os.path.join(folder, f"parser-lark{lark.__version__}.cache")


def _span(meta_or_token) -> ast.Span:
    if isinstance(meta_or_token, Token):
        return ast.Span(
            meta_or_token.line,
            meta_or_token.column,
            meta_or_token.end_line or meta_or_token.line,
            meta_or_token.end_column or meta_or_token.column + len(meta_or_token),
        )
    meta = meta_or_token
    if getattr(meta, "empty", True):
        return ast.Span.unknown()
    return ast.Span(meta.line, meta.column, meta.end_line, meta.end_column)


def _name(token: Token) -> str:
    text = str(token)
    return text[1:-1] if text.startswith("`") else text


# Limits that keep every query's parse, plan and evaluation within Python's stack and
# int64 arithmetic: a query beyond them is a QueryError, never a crash.
MAX_DEPTH = 100  # levels of nesting: parentheses, operators, each AND/OR/+ of a chain
INT_LIMIT = 2**63 - 1  # integer literals of expressions are int64
INT_DIGITS = 19  # digits of INT_LIMIT: longer integers are too large


def _number(text: str) -> int | float:
    if not text.isdigit():
        return float(text)  # 1e400 is inf, never an error here
    if len(text) > INT_DIGITS:  # beyond int64; int() refuses more than 4300 digits
        return float(text)
    return int(text)


def _literal_number(token: Token, text: str) -> int | float:
    """A number in an expression: an int64 or a finite float, else a positioned error."""
    value = _number(str(token))
    if str(token).isdigit() and (isinstance(value, float) or value > INT_LIMIT):
        raise QueryError(
            f"number too large: integers lie within ±{INT_LIMIT} (write {float(value):.3g} "
            "for a float)"
            if math.isfinite(value)
            else f"number too large: integers lie within ±{INT_LIMIT}",
            text,
            _span(token),
        )
    if not math.isfinite(value):
        raise QueryError("number too large for a float (at most 1.8e308)", text, _span(token))
    return value


def _unescape(text: str) -> str:
    body = text[1:-1]
    out, i = [], 0
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            out.append({"n": "\n", "t": "\t"}.get(nxt, nxt))
            i += 2
        else:
            out.append(body[i])
            i += 1
    return "".join(out)


@v_args(meta=True)
class _ToAst(Transformer):
    def __init__(self, text: str):
        super().__init__()
        self.text = text
        self._starts: list[int] | None = None

    def _error(self, message: str, span: ast.Span) -> QueryError:
        return QueryError(message, self.text, span)

    def _line_starts(self) -> list[int]:
        """Where each line of the text begins: once per file, not once per query (a file
        of 2,500 rules took 1.4 s to re-split)."""
        if self._starts is None:
            lines = self.text.splitlines(keepends=True)
            self._starts = [0, *itertools.accumulate(len(x) for x in lines)]
        return self._starts

    # ---- files and queries
    def start(self, meta, children):
        return children[0]

    def single_query(self, meta, children):
        return [children[0]]

    def named_queries(self, meta, children):
        seen: dict[str, ast.Query] = {}
        for query in children:
            if query.name in seen:
                raise self._error(f"query name '{query.name}' is used twice", query.span)
            seen[query.name] = query
        return list(children)

    def named_query(self, meta, children):
        name, query = children
        return ast.Query(**{**query.__dict__, "name": str(name)})

    def query(self, meta, children):
        components, *clauses = children
        fields: dict = {}
        seen: dict[str, ast.Span] = {}
        for kind, span, values in clauses:
            if kind in seen:
                raise self._error(f"{CLAUSE_FIELDS[kind]} is given twice", span)
            seen[kind] = span
            fields.update(values)
        span = _span(meta)
        text = self.text
        if span.line > 0:
            starts = self._line_starts()
            start = starts[span.line - 1] + span.column - 1
            end = starts[span.end_line - 1] + span.end_column - 1
            text = text[start:end]
        return ast.Query(components=components, text=text, span=span, **fields)

    def pattern_clause(self, meta, children):
        return children[0]

    def funnel_clause(self, meta, children):
        return children[0]

    def funnel_query(self, meta, children):
        query = self.query(meta, children)
        return ast.Query(**{**query.__dict__, "funnel": True})

    def seq(self, meta, children):
        return _flatten(children)

    def single(self, meta, children):
        return _flatten(children)

    def component(self, meta, children):
        negation, event_type, kleene, var, array_marker = children
        span = _span(meta)
        if array_marker is not None and kleene is None:
            raise self._error(
                f"'{var}[]' marks a Kleene variable: write the type with '+', e.g. "
                f"'{event_type or 'ANY'}+ {var}[]'",
                span,
            )
        if negation is not None and kleene is not None:
            raise self._error("a negated component cannot also be a Kleene closure", span)
        return ast.Component(
            var=str(var),
            event_type=event_type,
            negated=negation is not None,
            kleene=kleene is not None,
            span=span,
        )

    def event_set(self, meta, children):
        seen: set[str] = set()
        for item in children:
            if item.var in seen:
                raise self._error(f"variable '{item.var}' is used twice in this set", item.span)
            seen.add(item.var)
        return _EventSet(tuple(children))

    def set_item(self, meta, children):
        first, kleene, second, array_marker = children
        event_type, var = (None, first) if second is None else (str(first), second)
        if event_type is not None and event_type.upper() == "ANY":
            event_type = None
        if array_marker is not None and kleene is None:
            raise self._error(f"'{var}[]' marks a + variable: write '{var}+'", _span(meta))
        return ast.Component(
            var=str(var), event_type=event_type, kleene=kleene is not None, span=_span(meta)
        )

    def negation(self, meta, children):
        return True

    def kleene(self, meta, children):
        return True

    def array_marker(self, meta, children):
        return True

    def named_type(self, meta, children):
        return _name(children[0])  # `Admission NC`: a type with spaces, quoted

    def any_type(self, meta, children):
        return None

    # ---- clauses
    def where_clause(self, meta, children):
        return "where_clause", _span(meta), {"where": children[0]}

    def strategy_clause(self, meta, children):
        return (
            "strategy_clause",
            _span(meta),
            {"strategy": str(children[0]), "strategy_span": _span(children[0])},
        )

    def within_clause(self, meta, children):
        return "within_clause", _span(meta), {"within": children[0]}

    def order_clause(self, meta, children):
        names = tuple(_name(c) for c in children)
        return "order_clause", _span(meta), {"order_by": names, "order_span": _span(meta)}

    def return_clause(self, meta, children):
        return "return_clause", _span(meta), {"returns": tuple(children)}

    def group_clause(self, meta, children):
        names = tuple(_name(c) for c in children)
        return "group_clause", _span(meta), {"group_by": names, "group_span": _span(meta)}

    def agg_clause(self, meta, children):
        return "agg_clause", _span(meta), {"aggregates": tuple(children)}

    def emit_on_match(self, meta, children):
        return "emit_clause", _span(meta), {"emit": "match", "emit_span": _span(meta)}

    def emit_every_trigger(self, meta, children):
        return "emit_clause", _span(meta), {"emit": "every trigger", "emit_span": _span(meta)}

    def missing_clause(self, meta, children):
        span = _span(meta)
        return "missing_clause", span, {"missing_rates": tuple(children), "missing_span": span}

    def rate_item(self, meta, children):
        var, value = children
        return ast.MissingRate(None if var is None else str(var), value.value, span=_span(meta))

    def delay_clause(self, meta, children):
        span = _span(meta)
        return "delay_clause", span, {"delays": tuple(children), "delay_span": span}

    def delay_item(self, meta, children):
        var, law, *args = children
        args = tuple(a for a in args if a is not None)
        return ast.DelayLaw(str(var), str(law), args, span=_span(meta), law_span=_span(law))

    def threshold_clause(self, meta, children):
        span = _span(meta)
        value = children[0]
        return "threshold_clause", span, {"threshold": value.value, "threshold_span": value.span}

    def model_clause(self, meta, children):
        token = children[0]
        return (
            "model_clause",
            _span(meta),
            {"model_path": _unescape(str(token)), "model_span": _span(token)},
        )

    def select_clause(self, meta, children):
        return "select_clause", _span(meta), {"select": children[0], "select_span": _span(meta)}

    def select_all(self, meta, children):
        return "all"

    def select_earliest_maximal(self, meta, children):
        return "earliest maximal"

    def inclusive_clause(self, meta, children):
        return "inclusive_clause", _span(meta), {"inclusive": True, "inclusive_span": _span(meta)}

    def time_clause(self, meta, children):
        lower, upper, width = children
        fields = {
            "time_lower": _columns(lower),
            "time_upper": _columns(upper),
            "time_width": width,
            "time_span": _span(meta),
        }
        return "time_clause", _span(meta), fields

    def time_offset(self, meta, children):
        """`ts - 1 s`: the duration is a literal until the analysis gives it in ticks."""
        bound, op, amount, unit = children
        start, end = _span(amount), _span(unit)
        span = ast.Span(start.line, start.column, end.end_line, end.end_column)
        duration = replace(self.duration(meta, [amount, unit]), span=span)
        return ast.BinOp(str(op), bound, ast.Literal(duration, span=span), span=_span(meta))

    def time_width(self, meta, children):
        return children[0]

    def skip_clause(self, meta, children):
        return "skip_clause", _span(meta), {"skip": children[0], "skip_span": _span(meta)}

    def timeouts_clause(self, meta, children):
        return "timeouts_clause", _span(meta), {"timeouts": True, "timeouts_span": _span(meta)}

    def skip_past_last_event(self, meta, children):
        return "PAST_LAST_EVENT"

    def skip_to_next_event(self, meta, children):
        return "TO_NEXT_EVENT"

    def duration(self, meta, children):
        amount, unit = children
        unit_name = None
        if unit is not None:
            unit_name = UNITS.get(unit.lower())
            if unit_name is None:
                raise self._error(
                    f"unknown time unit '{unit}' (use ms, s, min, h or days)", _span(unit)
                )
        return ast.Duration(_number(str(amount)), unit_name, span=_span(meta))

    def unit(self, meta, children):
        return children[0]

    def return_item(self, meta, children):
        expr, alias = children
        return ast.OutputItem(expr, None if alias is None else _name(alias), span=_span(meta))

    agg_item = return_item

    # ---- episode rules (docs/episodes.md)
    def named_rule(self, meta, children):
        return self.named_query(meta, children)

    def single_episode(self, meta, children):
        return children[0]

    def episode_query(self, meta, children):
        episode, *clauses = children
        return replace(self.query(meta, [episode.vertices, *clauses]), episode=episode)

    def episode_clause(self, meta, children):
        *vertices, edges = children
        return ast.Episode(tuple(vertices), tuple(edges or ()), span=_span(meta))

    def episode_vertex(self, meta, children):
        (symbol, _), var = children
        return ast.Component(var=str(var), event_type=symbol, span=_span(meta))

    def episode_symbol(self, meta, children):
        token = children[0]
        text = _unescape(str(token)) if token.type == "STRING" else str(token)
        return text, _span(token)

    def episode_edges(self, meta, children):
        return [edge for chain in children for edge in chain]

    def episode_edge(self, meta, children):
        return [
            ast.EpisodeEdge(str(a), str(b), _span(a), _span(b))
            for a, b in itertools.pairwise(children)
        ]

    def symbol_clause(self, meta, children):
        return "symbol_clause", _span(meta), {"symbol": children[0], "symbol_span": _span(meta)}

    def predict_clause(self, meta, children):
        (symbol, span), duration = children
        return "predict_clause", _span(meta), {"predict": ast.Prediction(symbol, duration, span)}

    def confidence_clause(self, meta, children):
        values = {"confidence": float(children[0]), "confidence_span": _span(children[0])}
        return "confidence_clause", _span(meta), values

    # ---- expressions
    def or_(self, meta, children):
        return self._fold("or", meta, children)

    def and_(self, meta, children):
        return self._fold("and", meta, children)

    def _fold(self, op, meta, children):
        result = children[0]
        for child in children[1:]:
            span = ast.Span(
                result.span.line, result.span.column, child.span.end_line, child.span.end_column
            )
            result = ast.BinOp(op, result, child, span=span)
        return result

    def not_(self, meta, children):
        return ast.Not(children[0], span=_span(meta))

    def compare(self, meta, children):
        # a = b = c is shorthand for a = b AND b = c; other chains are errors.
        operands = children[0::2]
        ops = [str(op) for op in children[1::2]]
        ops = ["!=" if op == "<>" else "=" if op == "==" else op for op in ops]
        if len(ops) > 1 and any(op != "=" for op in ops):
            raise self._error(
                "only '=' can be chained (a.x = b.x = c.x); join other comparisons with AND",
                _span(meta),
            )
        parts = [
            ast.BinOp(
                op,
                left,
                right,
                span=ast.Span(
                    left.span.line, left.span.column, right.span.end_line, right.span.end_column
                ),
            )
            for op, left, right in zip(ops, operands, operands[1:])
        ]
        result = parts[0]
        for part in parts[1:]:
            result = ast.BinOp("and", result, part, span=_span(meta))
        return result

    def in_list(self, meta, children):
        return ast.InList(children[0], tuple(children[1:]), False, span=_span(meta))

    def not_in_list(self, meta, children):
        return ast.InList(children[0], tuple(children[2:]), True, span=_span(meta))

    def between(self, meta, children):
        value, low, high = children
        span = _span(meta)
        return ast.BinOp(
            "and", ast.BinOp(">=", value, low, span=span), ast.BinOp("<=", value, high, span=span),
            span=span,
        )  # fmt: skip

    def like(self, meta, children):
        return ast.Call("like", (children[0], children[1]), span=_span(meta))

    def not_like(self, meta, children):
        call = ast.Call("like", (children[0], children[2]), span=_span(meta))
        return ast.Not(call, span=_span(meta))

    def binop(self, meta, children):
        left, op, right = children
        return ast.BinOp(str(op), left, right, span=_span(meta))

    def negate(self, meta, children):
        operand = children[0]
        if isinstance(operand, ast.Literal) and not isinstance(operand.value, bool | str):
            return ast.Literal(-operand.value, span=_span(meta))
        return ast.Negate(operand, span=_span(meta))

    def equivalence(self, meta, children):
        return ast.Equivalence(_name(children[0]), span=_span(meta))

    def attr_ref(self, meta, children):
        var, attr = children
        return ast.AttrRef(str(var), _name(attr), span=_span(meta))

    def var_ref(self, meta, children):
        return ast.VarRef(str(children[0]), span=_span(meta))

    def call(self, meta, children):
        name, *args = children
        args = [a for a in args if a is not None]
        return ast.Call(str(name).lower(), tuple(args), span=_span(meta))

    def number(self, meta, children):
        return ast.Literal(_literal_number(children[0], self.text), span=_span(meta))

    def negative_number(self, meta, children):
        return ast.Literal(-_literal_number(children[0], self.text), span=_span(meta))

    def string(self, meta, children):
        return ast.Literal(_unescape(str(children[0])), span=_span(meta))

    def true(self, meta, children):
        return ast.Literal(True, span=_span(meta))

    def false(self, meta, children):
        return ast.Literal(False, span=_span(meta))


@dataclass(frozen=True)
class _EventSet:
    """`{c, p+}` while parsing: its components, flattened into SEQ by `_flatten`."""

    components: tuple[ast.Component, ...]


def _flatten(items) -> tuple[ast.Component, ...]:
    """SEQ's components with each event set of two or more variables written out, its
    members marked with the set's position; a set of one is a component of its own."""
    out: list[ast.Component] = []
    for position, item in enumerate(items):
        if not isinstance(item, _EventSet):
            out.append(item)
        elif len(item.components) == 1:
            out.append(item.components[0])
        else:
            out += [replace(c, in_set=position) for c in item.components]
    return tuple(out)


def _columns(expr: ast.Expr) -> ast.Expr:
    """TIME's bounds name the event's columns bare (ts - 5): each name becomes an
    attribute reference with no variable."""
    if isinstance(expr, ast.VarRef):
        return ast.AttrRef("", expr.var, span=expr.span)
    if isinstance(expr, ast.BinOp):
        return ast.BinOp(expr.op, _columns(expr.left), _columns(expr.right), span=expr.span)
    if isinstance(expr, ast.Negate):
        return ast.Negate(_columns(expr.operand), span=expr.span)
    if isinstance(expr, ast.Call):
        return ast.Call(expr.name, tuple(_columns(a) for a in expr.args), span=expr.span)
    return expr


# What a user writes for the terminals that are not one fixed text (those show as written).
_TOKEN_NAMES = {
    "$END": "the end of the query",
    "NAME": "a name",
    "QUOTED_NAME": "a quoted name",
    "NUMBER": "a number",
    "STRING": "a string",
    "COMPARE": "a comparison",
    "ADD_OP": "'+' or '-'",
    "MUL_OP": "'*', '/' or '%'",
    "SEMANTICS": "RUNNING or FINAL",
    "NOT_IN": "NOT IN",
    "NOT_LIKE": "NOT LIKE",
}
_KEYWORD = re.compile(r"[A-Za-z_]+(\\b)?")


def _token_name(name: str, parser: Lark) -> str | None:
    """A terminal as the user writes it: '^', '-}', WITHIN, a name (None: not shown)."""
    if name in _TOKEN_NAMES:
        return _TOKEN_NAMES[name]
    found = _terminals(parser).get(name)
    if found is None or name in ("WS", "COMMENT"):
        return None
    pattern = found.pattern
    if pattern.type == "str":
        return pattern.value.upper() if pattern.value.isidentifier() else f"'{pattern.value}'"
    if _KEYWORD.fullmatch(pattern.value):
        return pattern.value.removesuffix("\\b").upper()
    return None if name.startswith("__") else name.lower().replace("_", " ")


@cache
def _terminals(parser: Lark) -> dict:
    return {t.name: t for t in parser.terminals}


@cache
def _keywords(parser: Lark) -> tuple[str, ...]:
    """Every keyword of the grammar (SELECT, WITHIN, ...), upper case."""
    names = (_token_name(t, parser) for t in _terminals(parser))
    return tuple(sorted({n for n in names if n and n.replace("_", "").isalpha() and n.isupper()}))


def _describe_expected(expected: set[str], parser: Lark) -> str:
    names = {n for n in (_token_name(t, parser) for t in expected) if n}
    if not names:
        return ""
    listed = sorted(names)
    if len(listed) > 8:
        listed = [*listed[:8], "..."]
    return " (expected " + ", ".join(listed) + ")"


def _near_miss(word: str, keywords, cutoff: float = 0.75) -> str | None:
    """The keyword a mistyped word most likely is (WITHN: WITHIN)."""
    import difflib

    if not word.replace("_", "").isalpha() or word.upper() in keywords:
        return None
    found = difflib.get_close_matches(word.upper(), keywords, n=1, cutoff=cutoff)
    return found[0] if found else None


_SKIPPED = re.compile(r"\s+|--[^\n]*|//[^\n]*|/\*.*?\*/", re.S)
_QUOTED = re.compile(r"'(?:[^'\\]|\\.|'')*'|\"[^\"]*\"|`[^`]*`")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _tokens_before(text: str, end: int) -> list[tuple[int, int]]:
    """(start, end) of each token before offset `end`: words, quoted texts and single
    characters; whitespace and comments skipped."""
    out, pos = [], 0
    while pos < end:
        for pattern in (_SKIPPED, _QUOTED, _WORD):
            found = pattern.match(text, pos)
            if found:
                if pattern is not _SKIPPED:
                    out.append((pos, found.end()))
                pos = found.end()
                break
        else:
            out.append((pos, pos + 1))
            pos += 1
    return out


def _offset_span(text: str, start: int, end: int) -> ast.Span:
    line = text.count("\n", 0, start) + 1
    column = start - (text.rfind("\n", 0, start) + 1) + 1
    return ast.Span(line, column, line, column + max(end - start, 1))


def _unclosed(text: str, end: int) -> int | None:
    """The offset of the innermost '(' before `end` that is not closed before it."""
    opened = []
    for a, b in _tokens_before(text, end):
        if text[a:b] == "(":
            opened.append(a)
        elif text[a:b] == ")" and opened:
            opened.pop()
    return opened[-1] if opened else None


def _missing_paren(text: str, span: ast.Span, at: int, what: str) -> QueryError:
    """A ')' is missing right after the token before offset `at` (`what` cannot follow)."""
    before = _tokens_before(text, at)
    here = _offset_span(text, before[-1][1], before[-1][1]) if before else span
    opened = _unclosed(text, at)
    where = ""
    if opened is not None:
        o = _offset_span(text, opened, opened + 1)
        where = f" to close the '(' of line {o.line}, column {o.column}"
    return QueryError(f"a ')' is missing here{where} ({what})", text, here)


def _syntax_error(text: str, error: UnexpectedInput, parser: Lark | None = None) -> QueryError:
    """A syntax error in the user's words: what was found, what may come there (as
    written: '^', '-}', WITHIN), a keyword a mistyped word most likely is, and where a
    missing ')' belongs when that is the likely cause."""
    parser = parser or _lark()
    line, column = error.line, error.column
    expected = set(getattr(error, "expected", set()) or set())
    if isinstance(error, UnexpectedEOF) or (
        isinstance(error, UnexpectedToken) and error.token.type == "$END"
    ):
        lines = text.rstrip().splitlines() or [""]
        line, column = len(lines), len(lines[-1]) + 1
        if "RPAR" in expected and _unclosed(text, len(text)) is not None:
            span = ast.Span(line, column, line, column + 1)
            return _missing_paren(text, span, len(text.rstrip()), "the query ends")
        return QueryError(
            "the query ends too early" + _describe_expected(expected, parser),
            text,
            ast.Span(line, column, line, column + 1),
        )
    if isinstance(error, UnexpectedToken):
        token = error.token
        span = _span(token)
        listed = _describe_expected(expected, parser)
        before = _tokens_before(text, token.start_pos)
        keywords = _keywords(parser)
        expected_names = {_token_name(t, parser) for t in expected}
        allowed = [k for k in keywords if k in expected_names]
        guess = _near_miss(str(token), allowed)  # a keyword that may come here
        if guess:
            return QueryError(f"unexpected '{token}': did you mean {guess}?", text, span)
        if "RPAR" in expected and before:
            previous_line = text.count("\n", 0, before[-1][1]) + 1
            if previous_line < token.line:  # the ')' belongs at the end of an earlier line
                return _missing_paren(
                    text, span, token.start_pos, f"'{token}' on line {token.line} cannot come here"
                )
        if before and text[before[-1][0] : before[-1][1]].isidentifier():
            a, b = before[-1]  # a mistyped keyword taken for a name (an alias, a variable)
            guess = _near_miss(text[a:b], keywords, cutoff=0.88)
            if guess:
                word = text[a:b]
                return QueryError(
                    f"unexpected '{word}': did you mean {guess}?", text, _offset_span(text, a, b)
                )
        return QueryError(f"unexpected '{token}'" + listed, text, span)
    if isinstance(error, UnexpectedCharacters):
        char = text[error.pos_in_stream] if error.pos_in_stream < len(text) else "?"
        return QueryError(
            f"unexpected character '{char}'", text, ast.Span(line, column, line, column + 1)
        )
    return QueryError(str(error), text, ast.Span(max(line, 1), max(column, 1), line, column + 1))


def parse_file(text: str) -> list[ast.Query]:
    """Parse a query file: one query, or several `QUERY name: ...;` queries. A text
    parsed before is not parsed again (queries are immutable values): a notebook, a test
    or a stream that runs one query many times pays for its parse once."""
    return list(_parse_file(text))


@lru_cache(maxsize=256)
def _parse_file(text: str) -> tuple[ast.Query, ...]:
    if not text.strip():
        raise QueryError("the query is empty", text, ast.Span(1, 1, 1, 2))
    try:
        tree: Tree = _lark().parse(text)
    except UnexpectedInput as error:
        raise _syntax_error(text, error) from None
    _check_depth(tree, text)
    try:
        queries = _ToAst(text).transform(tree)
    except Exception as error:  # lark wraps errors raised inside the transformer
        inner = getattr(error, "orig_exc", error)
        if isinstance(inner, QueryError):
            raise inner from None
        raise
    for query in queries:
        _check_expr_depth(query, text)
    return tuple(queries)


def _too_deep(text: str, span: ast.Span) -> QueryError:
    return QueryError(
        f"the query nests deeper than {MAX_DEPTH} levels (parentheses, operators, or a chain "
        "of AND, OR or + counting one level each): split the expression",
        text,
        span,
    )


def _check_depth(tree: Tree, text: str) -> None:
    """The parse tree is at most MAX_DEPTH deep (walked without recursion), so that
    turning it into a Query cannot exhaust Python's stack."""
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _too_deep(text, _span(node.meta))
        stack += [(c, depth + 1) for c in node.children if isinstance(c, Tree)]


def _expr_children(expr: ast.Expr) -> tuple[ast.Expr, ...]:
    if isinstance(expr, ast.BinOp):
        return (expr.left, expr.right)
    if isinstance(expr, ast.Not | ast.Negate | ast.InList):
        return (expr.operand,)
    if isinstance(expr, ast.Call):
        return expr.args
    return ()


def _check_expr_depth(query: ast.Query, text: str) -> None:
    """Every expression of the query (chains of AND/OR fold into one level per operand)
    is at most MAX_DEPTH deep, so that planning and evaluation cannot exhaust the stack."""
    roots = [query.where, query.time_lower, query.time_upper, query.symbol]
    roots += [item.expr for item in (*query.returns, *query.aggregates)]
    stack = [(root, 1) for root in roots if root is not None]
    while stack:
        expr, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _too_deep(text, expr.span)
        stack += [(child, depth + 1) for child in _expr_children(expr)]


def parse(text: str) -> ast.Query:
    """Parse exactly one query.

    >>> q = parse("PATTERN SEQ(A a, !B b, C+ c[]) WHERE a.x = c.x WITHIN 10 s")
    >>> [(c.var, c.event_type, c.negated, c.kleene) for c in q.components]
    [('a', 'A', False, False), ('b', 'B', True, False), ('c', 'C', False, True)]
    >>> q.within.amount, q.within.unit
    (10, 's')
    """
    queries = parse_file(text)
    if len(queries) != 1:
        raise QueryError(f"expected one query, found {len(queries)}", text, queries[1].span)
    return queries[0]
