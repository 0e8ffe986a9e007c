"""Every regular expression the package runs, and inputs built to make each one backtrack.

Collection (:func:`collect`): each module of ``rightsize`` is imported and its source walked.

- a call ``re.<fn>(PATTERN, ...)`` whose pattern is a literal or a module-level name;
- a call ``NAME.<method>(...)`` on a compiled pattern held by a module-level name (also one
  imported from another module);
- every compiled pattern reachable from a module's globals (inside tuples, lists, dicts and
  frozen dataclasses): a table of rules whose use the source cannot show is run the strictest
  way, with ``search``;
- a polars string method (``.str.contains``, ``.str.extract``, ...) with a literal or
  module-level pattern (polars runs them on Rust's ``regex`` crate, which never backtracks;
  they are timed all the same);
- a call whose pattern is a loop variable over a module-level table (``for pattern, words in
  RULES: re.search(pattern, ...)``): every pattern of the table;
- a call whose pattern the walk cannot resolve (built at run time) is reported as
  :class:`Unresolved`: the test fails on it unless the pattern is package data (listed there
  with the reason).

Inputs (:func:`attacks`): from the pattern's parse tree, for each repetition in it, a prefix
that leads there, a "pump" that the repetition's body matches, pumped to the input size, and
then nothing, a character that fails, or the prefix and pump again and again (many start
positions for ``search``); plus each literal of the pattern repeated, and runs of single
characters. A pattern that backtracks quadratically or worse takes minutes to hours on a 1 MB
input built this way; a linear one takes milliseconds.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import pkgutil
import random
import re
import re._constants as C
import re._parser as P
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import rightsize

RE_FUNCS = {"compile", "search", "match", "fullmatch", "sub", "subn", "findall", "finditer",
            "split"}
PATTERN_METHODS = {"search", "match", "fullmatch", "sub", "subn", "findall", "finditer",
                   "split"}
POLARS_FUNCS = {"contains", "extract", "extract_all", "extract_groups", "replace",
                "replace_all", "count_matches", "find"}
# modules that need an optional dependency this check does not install
SKIP_PREFIXES = ("rightsize.profiler",)


@dataclass(frozen=True)
class Use:
    where: str  # module:line, or module:NAME for a pattern found in the globals
    pattern: str | bytes
    flags: int
    methods: frozenset[str]  # how the code runs it ("search", "sub", ...; "polars")


@dataclass(frozen=True)
class Unresolved:
    where: str
    source: str  # the call's text


def _modules() -> list[Any]:
    out = []
    for info in pkgutil.walk_packages(rightsize.__path__, "rightsize."):
        if info.name.startswith(SKIP_PREFIXES):
            continue
        try:
            out.append(importlib.import_module(info.name))
        except ImportError:  # an optional extra that is not installed here
            continue
    return out


def _patterns_in(value: Any, depth: int = 0) -> list[re.Pattern[Any]]:
    if isinstance(value, re.Pattern):
        return [value]
    if depth > 4:
        return []
    if isinstance(value, (tuple, list, set, frozenset)):
        return [p for v in value for p in _patterns_in(v, depth + 1)]
    if isinstance(value, dict):
        return [p for v in (*value.keys(), *value.values()) for p in _patterns_in(v, depth + 1)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [p for f in dataclasses.fields(value)
                for p in _patterns_in(getattr(value, f.name, None), depth + 1)]
    return []


def _flags(node: ast.Call, position: int, module: Any) -> int:
    """The ``flags`` argument of a ``re`` call (keyword, or positional at ``position``)."""
    expr = next((k.value for k in node.keywords if k.arg == "flags"), None)
    if expr is None and len(node.args) > position:
        expr = node.args[position]
    if expr is None:
        return 0
    return int(eval(compile(ast.Expression(expr), "<flags>", "eval"),
                    {"re": re, **vars(module)}))


FLAG_POSITION = {"compile": 1, "search": 2, "match": 2, "fullmatch": 2, "findall": 2,
                 "finditer": 2, "split": 3, "sub": 4, "subn": 4}


def _resolve(expr: ast.expr, module: Any) -> Any:
    """A literal, or a module-level name's value; None when the walk cannot tell."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, (str, bytes)):
        return expr.value
    if isinstance(expr, ast.Name):
        value = getattr(module, expr.id, None)
        if isinstance(value, (str, bytes, re.Pattern)):
            return value
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
        owner = getattr(module, expr.value.id, None)
        value = getattr(owner, expr.attr, None) if owner is not None else None
        if isinstance(value, (str, bytes, re.Pattern)) and expr.attr != "pattern":
            return value
    return None


def _loop_tables(tree: ast.AST) -> dict[str, list[tuple[str, int | None]]]:
    """Loop variables bound from a module-level name: variable -> [(table, index in a row or
    None)], from ``for`` statements and comprehensions (``for pattern, words in TABLE``)."""
    found: dict[str, list[tuple[str, int | None]]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.comprehension)) and isinstance(node.iter, ast.Name):
            target = node.target
            if isinstance(target, ast.Name):
                found.setdefault(target.id, []).append((node.iter.id, None))
            elif isinstance(target, ast.Tuple):
                for i, elt in enumerate(target.elts):
                    if isinstance(elt, ast.Name):
                        found.setdefault(elt.id, []).append((node.iter.id, i))
    return found


def _table_values(expr: ast.expr, loops: dict[str, list[tuple[str, int | None]]],
                  module: Any) -> list[Any]:
    """The patterns a loop variable takes from a module's table, when every one is one."""
    if not isinstance(expr, ast.Name):
        return []
    values: list[Any] = []
    for table_name, index in loops.get(expr.id, []):
        table = getattr(module, table_name, None)
        if not isinstance(table, (tuple, list)):
            return []
        for row in table:
            value = row if index is None else (row[index] if isinstance(row, (tuple, list))
                                               and len(row) > index else None)
            if not isinstance(value, (str, bytes, re.Pattern)):
                return []
            values.append(value)
    return values


def _as_use(where: str, value: Any, flags: int, methods: set[str]) -> Use:
    if isinstance(value, re.Pattern):
        return Use(where, value.pattern, value.flags, frozenset(methods))
    return Use(where, value, flags, frozenset(methods))


def collect() -> tuple[list[Use], list[Unresolved]]:
    """Every regex use in the package, and the calls whose pattern could not be resolved."""
    uses: list[Use] = []
    unresolved: list[Unresolved] = []
    seen_patterns: set[int] = set()
    modules = _modules()
    for module in modules:
        path = Path(module.__file__ or "")
        if path.suffix != ".py":
            continue
        source = path.read_text("utf-8")
        name = module.__name__
        tree = ast.parse(source)
        loops = _loop_tables(tree)
        top_level = {id(n) for stmt in tree.body if not isinstance(
            stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for n in ast.walk(stmt)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            func, owner = node.func.attr, node.func.value
            where = f"{name}:{node.lineno}"
            if isinstance(owner, ast.Name) and owner.id == "re" and func in RE_FUNCS:
                if not node.args:
                    continue
                value = _resolve(node.args[0], module)
                if value is None and func == "compile" and id(node) in top_level:
                    continue  # a module's own compiled pattern: found in its globals below
                rows = _table_values(node.args[0], loops, module)
                if value is None and rows:  # a loop over a module's table of patterns
                    uses += [_as_use(where, v, 0, {func}) for v in rows]
                    continue
                if value is None:
                    unresolved.append(Unresolved(where, ast.get_source_segment(source, node)
                                                 or func))
                    continue
                if isinstance(value, re.Pattern):
                    seen_patterns.add(id(value))
                if func == "compile" and id(node) in top_level:
                    continue  # compiled here, run elsewhere: its uses say how
                methods = {"search"} if func == "compile" else {func}
                uses.append(_as_use(where, value, _flags(node, FLAG_POSITION[func], module),
                                    methods))
            elif func in PATTERN_METHODS and isinstance(owner, ast.Name):
                value = getattr(module, owner.id, None)
                if isinstance(value, re.Pattern):
                    seen_patterns.add(id(value))
                    uses.append(_as_use(where, value, 0, {func}))
            elif (func in POLARS_FUNCS and isinstance(owner, ast.Attribute)
                  and owner.attr == "str" and node.args
                  and not any(k.arg == "literal" for k in node.keywords)):
                arg = node.args[0]
                if isinstance(arg, ast.Attribute) and arg.attr == "pattern" and isinstance(
                        arg.value, ast.Name):  # NAME.pattern: a compiled pattern's text
                    arg = arg.value
                value = _resolve(arg, module)
                if isinstance(value, re.Pattern):
                    seen_patterns.add(id(value))
                if isinstance(value, (str, re.Pattern)):
                    uses.append(_as_use(where, value, 0, {"polars"}))
    for module in modules:  # after every module's calls: a pattern used elsewhere is seen
        for global_name, value in vars(module).items():
            for pattern in _patterns_in(value):
                if id(pattern) not in seen_patterns:
                    seen_patterns.add(id(pattern))
                    uses.append(_as_use(f"{module.__name__}:{global_name}", pattern, 0,
                                        {"search"}))
    return _dedupe(uses), unresolved


def _dedupe(uses: list[Use]) -> list[Use]:
    merged: dict[tuple[Any, int], Use] = {}
    for use in uses:
        key = (use.pattern, use.flags)
        if key in merged:
            old = merged[key]
            merged[key] = Use(old.where, old.pattern, old.flags, old.methods | use.methods)
        else:
            merged[key] = use
    return list(merged.values())


# -- inputs ---------------------------------------------------------------------------------

ALPHABET = (" \t\n0123456789abcdefxyzABCXYZ_-.,:;\"'\\/{}[]()<>=#%*+|$!?@&~^`"
            "\u00e9\u2026\x00\x7f")


class _Sampler:
    """Random strings that the pieces of a parse tree match."""

    def __init__(self, rng: random.Random, flags: int) -> None:
        self.rng = rng
        self.ignore_case = bool(flags & re.IGNORECASE)
        self.dotall = bool(flags & re.DOTALL)
        self.target: Any = None  # a repeat node to expand with the pump
        self.pump = ""
        self.marks: list[int] = []  # where the pump starts in the output

    def seq(self, items: Any, out: list[str]) -> None:
        for op, av in items:
            self.item(op, av, out)

    def item(self, op: Any, av: Any, out: list[str]) -> None:
        if op is C.LITERAL:
            out.append(chr(av))
        elif op is C.NOT_LITERAL:
            out.append(self._pick(lambda c: ord(c) != av))
        elif op is C.ANY:
            out.append(self._pick(lambda c: self.dotall or c != "\n"))
        elif op is C.IN:
            out.append(self._pick(lambda c: _in_class(c, av, self.ignore_case)))
        elif op is C.BRANCH:
            self.seq(self.rng.choice(av[1]).data, out)
        elif op is C.SUBPATTERN:
            self.seq(av[3].data, out)
        elif op is C.ATOMIC_GROUP:
            self.seq(av.data, out)
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            low, high, body = av
            if av is self.target:
                self.marks.append(len("".join(out)))
                out.append(self.pump)
                return
            count = self.rng.randint(low, min(high, low + 3))
            for _ in range(count):
                self.seq(body.data, out)
        elif op is C.GROUPREF_EXISTS:
            self.seq(av[1].data, out)
        # AT, ASSERT, ASSERT_NOT, GROUPREF, CATEGORY at top level: nothing to emit

    def _pick(self, ok: Any) -> str:
        choices = [c for c in ALPHABET if ok(c)]
        if not choices:
            choices = [chr(i) for i in range(32, 0x250) if ok(chr(i))][:64] or ["a"]
        return self.rng.choice(choices)


def _in_class(c: str, items: Any, ignore_case: bool) -> bool:
    negate = False
    hit = False
    for op, av in items:
        if op is C.NEGATE:
            negate = True
        elif op is C.LITERAL:
            hit |= ord(c) == av or (ignore_case and c.lower() == chr(av).lower())
        elif op is C.RANGE:
            hit |= av[0] <= ord(c) <= av[1] or (
                ignore_case and (av[0] <= ord(c.lower()) <= av[1]
                                 or av[0] <= ord(c.upper()) <= av[1]))
        elif op is C.CATEGORY:
            hit |= _category(c, av)
    return hit != negate


def _category(c: str, cat: Any) -> bool:
    name = str(cat)
    if "NOT_" in name:
        return not _category(c, getattr(C, name.replace("NOT_", "")))
    if "DIGIT" in name:
        return c.isdigit()
    if "SPACE" in name:
        return c.isspace()
    if "WORD" in name:
        return c.isalnum() or c == "_"
    if "LINEBREAK" in name:
        return c == "\n"
    return False


def _repeats(items: Any) -> list[Any]:
    """Every repeat node (its ``av`` tuple) of a parse tree, outermost first."""
    found: list[Any] = []
    for op, av in items:
        if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            if av[1] > 1:
                found.append(av)
            found += _repeats(av[2].data)
        elif op is C.BRANCH:
            for alt in av[1]:
                found += _repeats(alt.data)
        elif op is C.SUBPATTERN:
            found += _repeats(av[3].data)
        elif op in (C.ATOMIC_GROUP,):
            found += _repeats(av.data)
        elif op in (C.ASSERT, C.ASSERT_NOT):
            found += _repeats(av[1].data)
    return found


def _literals(items: Any) -> list[str]:
    """The runs of literal characters in a parse tree."""
    runs: list[str] = []
    current = ""
    for op, av in items:
        if op is C.LITERAL:
            current += chr(av)
            continue
        if current:
            runs.append(current)
            current = ""
        if op is C.SUBPATTERN:
            runs += _literals(av[3].data)
        elif op is C.BRANCH:
            for alt in av[1]:
                runs += _literals(alt.data)
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            runs += _literals(av[2].data)
    if current:
        runs.append(current)
    return runs


def attacks(use: Use, size: int, per_repeat: int = 3, seed: int = 0) -> list[str]:
    """Adversarial inputs of about ``size`` characters for ``use`` (see the module doc)."""
    text = use.pattern.decode("latin-1") if isinstance(use.pattern, bytes) else use.pattern
    flags = use.flags & ~re.LOCALE
    if isinstance(use.pattern, bytes):
        flags |= re.ASCII
    tree = P.parse(text, flags & ~re.ASCII if isinstance(use.pattern, bytes) else flags)
    rng = random.Random(f"{seed}:{text!r}")
    out: list[str] = []
    for target in _repeats(tree.data):
        for _ in range(per_repeat):
            sampler = _Sampler(rng, flags)
            body: list[str] = []
            sampler.seq(target[2].data, body)
            pump = "".join(body) or rng.choice(ALPHABET)
            sampler.target, sampler.pump = target, "\x01PUMP\x01"
            whole: list[str] = []
            sampler.seq(tree.data, whole)
            sample = "".join(whole)
            at = sample.find("\x01PUMP\x01")
            prefix, suffix = (sample[:at], sample[at + 6:]) if at >= 0 else ("", "")
            pumped = pump * max(1, (size - len(prefix)) // len(pump))
            out += [prefix + pumped, prefix + pumped + "\x00", prefix + pumped + suffix[:-1],
                    ((prefix + pump) * max(1, size // len(prefix + pump)))[:size]]
    for run in _literals(tree.data):
        out.append((run * (size // len(run) + 1))[:size])
        out.append(((run + " ") * (size // (len(run) + 1) + 1))[:size])
    for c in " a0-_\"\\{<\n":
        out.append(c * size)
    return [s for s in dict.fromkeys(out) if s]


def encode(use: Use, text: str) -> str | bytes:
    return text.encode("utf-8", "surrogatepass") if isinstance(use.pattern, bytes) else text
