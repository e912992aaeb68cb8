"""A row pattern compiled into a program for a Pike virtual machine, as Trino compiles it.

Instructions: LABEL v (consume one row mapped to v), SPLIT a b (try a, then b: the order is
the preferment), JUMP t, SAVE (a boundary of an outermost exclusion), START (^), END ($), DONE. A bounded
quantifier {n,m} is unrolled into n copies and m - n optional ones; an unbounded one loops
back to its last copy. Alternation puts the left branch first; PERMUTE is the alternation
of the permutations in lexicographic order; a greedy quantifier prefers one more
iteration, a reluctant one prefers to stop.

Between two rows a thread runs the instructions that consume nothing (its *closure*) until
it waits at a LABEL or DONE. A path that comes back to an instruction it (or an
equivalent thread) already ran at the same row dies there: this is what stops a loop
whose iteration matched no row (docs/match_recognize.md, "Empty iterations").

>>> from sparkcep.language.match_recognize import parse_match_recognize
>>> q = parse_match_recognize("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts "
...                           "PATTERN (A B*) DEFINE A AS true)")
>>> program = RowPatternProgram(q.pattern, ["A", "B"])
>>> print(program)
0 LABEL A
1 SPLIT 2 4
2 LABEL B
3 SPLIT 2 4
4 DONE
>>> program.closure(1, at_start=False, at_end=None)
((2, 0), (4, 0))
"""

from __future__ import annotations

from itertools import permutations

from sparkcep.language import match_recognize as mr

LABEL, SPLIT, JUMP, SAVE, START, END, DONE, BLOCKED = range(8)
NAMES = ("LABEL", "SPLIT", "JUMP", "SAVE", "START", "END", "DONE", "BLOCKED")


class RowPatternProgram:
    """The instructions of a pattern, and the closure of each one, memoized."""

    def __init__(self, pattern: mr.PatternNode, variables: list[str] | tuple[str, ...]):
        self.variables = list(variables)
        self.index = {v: i for i, v in enumerate(self.variables)}
        self.op: list[int] = []
        self.a: list[int] = []
        self.b: list[int] = []
        self._excluding = False  # compiling inside an exclusion
        self._compile(pattern)
        self._emit(DONE)
        self._closures: dict[tuple[int, bool, bool | None], tuple] = {}
        self._tables: dict[tuple[bool, bool | None], list] = {}

    def __len__(self) -> int:
        return len(self.op)

    def __str__(self) -> str:
        lines = []
        for i, op in enumerate(self.op):
            if op == LABEL:
                lines.append(f"{i} LABEL {self.variables[self.a[i]]}")
            elif op == SPLIT:
                lines.append(f"{i} SPLIT {self.a[i]} {self.b[i]}")
            elif op == JUMP:
                lines.append(f"{i} JUMP {self.a[i]}")
            else:
                lines.append(f"{i} {NAMES[op]}")
        return "\n".join(lines)

    # ---- compilation
    def _emit(self, op: int, a: int = -1, b: int = -1) -> int:
        self.op.append(op)
        self.a.append(a)
        self.b.append(b)
        return len(self.op) - 1

    def _set(self, at: int, op: int, a: int, b: int = -1):
        self.op[at], self.a[at], self.b[at] = op, a, b

    def _compile(self, node: mr.PatternNode):
        if isinstance(node, mr.PVar):
            self._emit(LABEL, self.index[node.name])
        elif isinstance(node, mr.Anchor):
            self._emit(START if node.kind == "^" else END)
        elif isinstance(node, mr.Concat):
            for item in node.items:
                self._compile(item)
        elif isinstance(node, mr.Alt):
            self._alternation([[item] for item in node.items])
        elif isinstance(node, mr.Permute):
            order = permutations(range(len(node.items)))  # lexicographic
            self._alternation([[node.items[i] for i in p] for p in order])
        elif isinstance(node, mr.Exclude):
            if self._excluding:  # the outer exclusion covers it: bounds come in pairs
                self._compile(node.node)
                return
            self._excluding = True
            self._emit(SAVE)
            self._compile(node.node)
            self._emit(SAVE)
            self._excluding = False
        elif isinstance(node, mr.Quant):
            if node.max is None:
                self._loop(node.node, node.min, node.greedy)
            else:
                self._range(node.node, node.min, node.max, node.greedy)
        else:
            raise TypeError(node)

    def _alternation(self, parts: list[list[mr.PatternNode]]):
        jumps = []
        for part in parts[:-1]:
            split = self._emit(SPLIT)
            for item in part:
                self._compile(item)
            jumps.append(self._emit(JUMP))
            self._set(split, SPLIT, split + 1, len(self.op))
        for item in parts[-1]:
            self._compile(item)
        for jump in jumps:
            self._set(jump, JUMP, len(self.op))

    def _loop(self, node, low: int, greedy: bool):
        if low == 0:
            split = self._emit(SPLIT)
            body = len(self.op)
            self._compile(node)
            self._back(body, greedy)
            self._split(split, body, len(self.op), greedy)
            return
        body = len(self.op)
        for _ in range(low):
            body = len(self.op)
            self._compile(node)
        self._back(body, greedy)

    def _back(self, body: int, greedy: bool):
        at = self._emit(SPLIT)
        self._split(at, body, at + 1, greedy)

    def _split(self, at: int, more: int, stop: int, greedy: bool):
        self._set(at, SPLIT, *((more, stop) if greedy else (stop, more)))

    def _range(self, node, low: int, high: int, greedy: bool):
        for _ in range(low):
            self._compile(node)
        splits = []
        for _ in range(high - low):
            splits.append((self._emit(SPLIT), len(self.op)))
            self._compile(node)
        end = len(self.op)
        for at, body in splits:
            self._split(at, body, end, greedy)

    # ---- closures
    def closure(self, pc: int, at_start: bool, at_end: bool | None) -> tuple:
        """The waiting instructions a thread at `pc` reaches without consuming a row, in
        preferment order, each with the number of SAVEs on its way: ((pc, saves), ...).

        `at_start`: the row position is the partition's first (^ holds); `at_end`: it is
        past the partition's last row ($ holds), None when that is not known yet (a thread
        reaching $ then waits, BLOCKED, for the rest of the partition)."""
        key = (pc, at_start, at_end)
        found = self._closures.get(key)
        if found is None:
            found = self._closures[key] = tuple(self._walk(pc, at_start, at_end))
        return found

    def table(self, at_start: bool, at_end: bool | None) -> list[tuple]:
        """The closure of every instruction, for one kind of row position."""
        key = (at_start, at_end)
        found = self._tables.get(key)
        if found is None:
            found = [self.closure(pc, at_start, at_end) for pc in range(len(self.op))]
            self._tables[key] = found
        return found

    def first_steps(self) -> tuple[list[int], list[tuple[int, list[int], bool]]]:
        """What a match that does not start at the partition's first row needs of its
        first two rows: for each variable `l` the first row may be mapped to, the
        variables the second row may then be mapped to, and whether the match may end
        after one row. (The first list: the variables of the first row.)"""
        mid = self.table(False, False)
        open_end = self.table(False, None)
        firsts, steps = [], []
        for p, _ in mid[0]:
            if self.op[p] != LABEL:
                continue
            label = self.a[p]
            after = open_end[p + 1]
            seconds = [self.a[q] for q, _ in after if q >= 0 and self.op[q] == LABEL]
            may_end = any(q < 0 or self.op[q] == DONE for q, _ in after)
            firsts.append(label)
            steps.append((label, seconds, may_end))
        return firsts, steps

    def _walk(self, pc: int, at_start: bool, at_end: bool | None):
        out: list[tuple[int, int]] = []
        seen: set[int] = set()
        stack = [(pc, 0)]
        while stack:
            p, saves = stack.pop()
            if p in seen:
                continue  # this path came back without consuming a row: it dies
            seen.add(p)
            op = self.op[p]
            if op in (LABEL, DONE):
                out.append((p, saves))
            elif op == SPLIT:
                stack.append((self.b[p], saves))
                stack.append((self.a[p], saves))
            elif op == JUMP:
                stack.append((self.a[p], saves))
            elif op == SAVE:
                stack.append((p + 1, saves + 1))
            elif op == START:
                if at_start:
                    stack.append((p + 1, saves))
            elif op == END:
                if at_end is None:
                    out.append((-1 - p, saves))  # BLOCKED until the partition's end is known
                elif at_end:
                    stack.append((p + 1, saves))
        return out

    def can_be_empty(self) -> bool:
        """Whether the pattern can match no row at all (then every row starts a match)."""
        return any(p >= 0 and self.op[p] == DONE for p, _ in self.closure(0, True, True)) or any(
            p >= 0 and self.op[p] == DONE for p, _ in self.closure(0, False, True)
        )
