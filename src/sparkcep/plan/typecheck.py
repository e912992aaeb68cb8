"""Names and types in expressions: every attribute exists, every call is known, every
comparison compares like with like, and each conjunct says which variables it reads."""

from __future__ import annotations

from dataclasses import dataclass, field

from sparkcep.functions import FUNCTIONS, check_kinds
from sparkcep.language import ast
from sparkcep.plan.model import AGGREGATES, STRATEGIES
from sparkcep.schema import NUMERIC, Kind, comparable, kind_of_value


@dataclass
class Refs:
    """How a conjunct refers to variables."""

    element: set[str] = field(default_factory=set)  # v.attr outside aggregates
    prev: set[str] = field(default_factory=set)  # prev(v.attr)
    aggregate: set[str] = field(default_factory=set)  # agg(v.attr), count(v)

    @property
    def all(self) -> set[str]:
        return self.element | self.prev | self.aggregate


class TypeChecker:
    """Expression checks of the analyzer (it provides `comps`, `schema` and `error`)."""

    def _check_expr(self, expr: ast.Expr, allow_var: bool, inside_agg: bool = False):
        for node in self._children_first(expr):
            if isinstance(node, ast.AttrRef):
                self._check_attr(node)
            elif isinstance(node, ast.VarRef):
                if node.var not in self.comps:
                    raise self.error(f"unknown variable '{node.var}'", node.span)
                if not allow_var:
                    raise self.error(
                        f"'{node.var}' is an event, not a value: write {node.var}.attribute",
                        node.span,
                    )
            elif isinstance(node, ast.Call):
                self._check_call(node)

    def _children_first(self, expr):
        """Walk, but do not descend into calls (their arguments are checked by _check_call)."""
        yield expr
        if isinstance(expr, ast.BinOp):
            yield from self._children_first(expr.left)
            yield from self._children_first(expr.right)
        elif isinstance(expr, ast.Not | ast.Negate):
            yield from self._children_first(expr.operand)
        elif isinstance(expr, ast.InList):
            yield from self._children_first(expr.operand)
            kinds = {kind_of_value(v.value) for v in expr.values}
            kinds = {"float" if k == "int" else k for k in kinds}
            if len(kinds) > 1:
                raise self.error("the values of an IN list must have one type", expr.span)

    def _check_attr(self, node: ast.AttrRef):
        if node.var not in self.comps:
            known = ", ".join(self.comps)
            raise self.error(f"unknown variable '{node.var}' (the pattern has {known})", node.span)
        if self.schema is not None and node.attr not in self.schema:
            raise self.error(
                f"'{node.attr}' is not a column of the input (columns: {', '.join(self.schema)})",
                node.span,
            )

    def _check_call(self, node: ast.Call):
        name = node.name
        if name == "prev":
            if len(node.args) != 1 or not isinstance(node.args[0], ast.AttrRef):
                raise self.error("prev() takes one attribute: prev(b.price)", node.span)
            arg = node.args[0]
            self._check_attr(arg)
            if not self.comps[arg.var].kleene:
                raise self.error(
                    f"prev() refers to the previous element of a Kleene variable, and "
                    f"'{arg.var}' is not one (write its type with '+')",
                    node.span,
                )
        elif name in AGGREGATES:
            if len(node.args) != 1:
                raise self.error(f"{name}() takes one argument: {name}(b.price)", node.span)
            arg = node.args[0]
            if isinstance(arg, ast.VarRef) and name == "count":
                if arg.var not in self.comps:
                    raise self.error(f"unknown variable '{arg.var}'", arg.span)
            elif isinstance(arg, ast.AttrRef):
                self._check_attr(arg)
            else:
                raise self.error(
                    f"{name}() takes an attribute of a variable, e.g. {name}(b.price)", arg.span
                )
        elif name in FUNCTIONS:
            fn = FUNCTIONS[name]
            least, most = fn.arity
            if len(node.args) < least or (most is not None and len(node.args) > most):
                count = f"{least}" if least == most else f"at least {least}"
                raise self.error(f"{name}() takes {count} argument(s): {fn.usage}", node.span)
            for arg in node.args:
                self._check_expr(arg, allow_var=False)
        elif name.upper() in STRATEGIES:
            raise self.error(
                f"{name}(...) selects the strategy: write it as a condition of its own "
                f"joined with AND, or use STRATEGY {name.upper()}",
                node.span,
            )
        else:
            known = ", ".join(("prev", *AGGREGATES, *FUNCTIONS))
            raise self.error(f"unknown function '{name}' (known: {known})", node.span)

    def _attr_kind(self, attr: str) -> Kind:
        if self.schema is None:
            return "unknown"
        return self.schema.get(attr, "unknown")

    def _type(self, expr: ast.Expr) -> Kind:
        """The kind of an expression's value; raises on a type mismatch."""
        if isinstance(expr, ast.Literal):
            return kind_of_value(expr.value)
        if isinstance(expr, ast.AttrRef):
            return self._attr_kind(expr.attr)
        if isinstance(expr, ast.VarRef):
            return "unknown"
        if isinstance(expr, ast.Call):
            return self._call_type(expr)
        if isinstance(expr, ast.Negate):
            kind = self._type(expr.operand)
            if kind not in (*NUMERIC, "unknown"):
                raise self.error(f"cannot negate a {kind}", expr.span)
            return kind
        if isinstance(expr, ast.Not):
            kind = self._type(expr.operand)
            if kind not in ("bool", "unknown"):
                raise self.error(f"NOT needs a condition, not a {kind}", expr.span)
            return "bool"
        if isinstance(expr, ast.InList):
            kind = self._type(expr.operand)
            value_kind = kind_of_value(expr.values[0].value)
            if not comparable(kind, value_kind):
                raise self.error(
                    f"cannot compare {_a(kind)} with a list of {value_kind} values", expr.span
                )
            return "bool"
        if isinstance(expr, ast.BinOp):
            return self._binop_type(expr)
        raise self.error("unsupported expression", expr.span)

    def _call_type(self, expr: ast.Call) -> Kind:
        if expr.name == "count":
            return "int"
        kinds = [self._type(a) for a in expr.args]
        if expr.name in FUNCTIONS:
            fn = FUNCTIONS[expr.name]
            problem = check_kinds(fn, kinds)
            if problem:
                raise self.error(problem, expr.span)
            return fn.result(kinds)
        if expr.name in ("sum", "avg") and kinds[0] not in (*NUMERIC, "unknown"):
            raise self.error(f"{expr.name}() needs numbers, not {kinds[0]}", expr.span)
        return "float" if expr.name == "avg" else kinds[0]

    def _binop_type(self, expr: ast.BinOp) -> Kind:
        left, right = self._type(expr.left), self._type(expr.right)
        if expr.op in ast.LOGIC:
            for side, kind in ((expr.left, left), (expr.right, right)):
                if kind not in ("bool", "unknown"):
                    raise self.error(
                        f"{expr.op.upper()} joins conditions, and this is a {kind}", side.span
                    )
            return "bool"
        if expr.op in ast.COMPARISONS:
            if not comparable(left, right):
                raise self.error(
                    f"cannot compare {_a(left)} with {_a(right)}: "
                    f"{ast.to_text(expr.left)} {expr.op} {ast.to_text(expr.right)}",
                    expr.span,
                )
            return "bool"
        for side, kind in ((expr.left, left), (expr.right, right)):
            if kind not in (*NUMERIC, "unknown"):
                raise self.error(
                    f"arithmetic '{expr.op}' needs numbers, and this is a {kind}", side.span
                )
        if expr.op == "/" or "float" in (left, right):
            return "float"
        if "unknown" in (left, right):
            return "unknown"
        return "int"

    def _refs(self, expr: ast.Expr) -> Refs:
        refs = Refs()

        def visit(node, in_call: str | None):
            if isinstance(node, ast.AttrRef | ast.VarRef):
                if in_call == "prev":
                    refs.prev.add(node.var)
                elif in_call in AGGREGATES:
                    refs.aggregate.add(node.var)
                else:
                    refs.element.add(node.var)
            elif isinstance(node, ast.Call):
                inner = node.name if node.name in ("prev", *AGGREGATES) else in_call
                for arg in node.args:
                    visit(arg, inner)
            elif isinstance(node, ast.BinOp):
                visit(node.left, in_call)
                visit(node.right, in_call)
            elif isinstance(node, ast.Not | ast.Negate | ast.InList):
                visit(node.operand, in_call)

        visit(expr, None)
        return refs


def _a(kind: str) -> str:
    return ("an " if kind[0] in "aeiou" else "a ") + kind
