"""GS249: forward or backward calls a linted helper with arguments its signature cannot bind."""

from __future__ import annotations

import ast

from gradsmith.linter._facts import Facts
from gradsmith.linter._kernels import finder
from gradsmith.linter._registry import Rule, checker
from gradsmith.linter.rules._call_keywords import _calls, helper_calls
from gradsmith.linter.rules._common import short
from gradsmith.linter.rules._scope import bindings, local_names

_H = "import torch\n\n\ndef _scale(x, factor, bias=0.0):\n    return x * factor + bias\n\n\n" \
     "class Scale(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
_B = "\n    @staticmethod\n    def backward(ctx, g):\n        return g * 2.0\n"
GS249 = Rule(
    "GS249", "helper-arity", "error",
    "forward or backward calls a function of the linted code with arguments its signature "
    "cannot bind (too many or too few positional arguments, a missing required argument, "
    "one argument given twice)",
    "The helper is a plain module-level `def` of the linted code (or one wrapped by a "
    "`functools.wraps` decorator that passes every argument on), its name is bound once "
    "(no second def, assignment, import or `global` of it, not hidden by a local or an "
    "enclosing function's name), the call spells out its "
    "arguments (no `*args`/`**kwargs` at the call) and runs whenever forward or backward "
    "runs (a top-level statement, or a top-level statement of a helper such a statement "
    "calls): every call of the Function raises TypeError. Typically the helper gained or "
    "lost a parameter and this caller was not updated.",
    "pass the arguments the helper's signature asks for.",
    bad=_H + "        return _scale(x)  # GS249\n" + _B,
    good=_H + "        return _scale(x, 2.0)\n" + _B,
    brief="call cannot bind: TypeError",
)

#: How many helper calls deep a call that runs on every call of forward/backward is followed.
_DEPTH = 2


@checker(GS249)
def check_helper_arity(facts: Facts, report) -> None:
    sym = facts.sym_of[id(facts.fc.source)]
    for method, call in helper_calls(facts):
        if bindings(method.source).get(call.func.id) != 1:
            continue
        problem = _first_problem(call, sym, facts.sym_of, _DEPTH, set())
        if problem is not None:
            report("GS249", method.source, call, problem)


def _first_problem(call: ast.Call, sym, sym_of: dict, depth: int, seen: set) -> str | None:
    """Why ``call`` (a call of a bare name in module ``sym``) raises TypeError whenever it
    runs, or why one of the calls its helper always makes does; None when it binds or the
    callee's signature is not known for certain."""
    find = finder(sym, sym_of)
    helper = find(call.func)
    owner = find.owner(helper) if helper is not None else None
    if owner is None or id(helper) in seen or not _plain(helper, owner, find):
        return None
    if owner is not sym and _module_count(sym_of, owner.module) != 1:
        return None  # two linted files under one module name: which one runs is not known
    name = short(helper.name, 30)
    why = _unbindable(helper.args, call)
    if why is not None:
        return f"`{name}()` {why}"
    if depth == 0:
        return None
    seen.add(id(helper))
    shadowed = local_names(helper)
    for stmt in helper.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for inner in _calls(stmt):
            if inner.func.id in shadowed or bindings(owner.source).get(inner.func.id) != 1:
                continue
            why = _first_problem(inner, owner, sym_of, depth - 1, seen)
            if why is not None:
                return short(f"`{name}()` calls {why}", 90)
    return None


_COUNTS: dict[int, tuple[int, dict[str, int]]] = {}


def _module_count(sym_of: dict, module: str) -> int:
    """How many linted files go by the module name ``module`` (kept for the last run's
    ``sym_of`` only)."""
    entry = _COUNTS.get(id(sym_of))
    if entry is None or entry[0] != len(sym_of):
        _COUNTS.clear()
        counts: dict[str, int] = {}
        for sym in sym_of.values():
            counts[sym.module] = counts.get(sym.module, 0) + 1
        entry = _COUNTS[id(sym_of)] = (len(sym_of), counts)
    return entry[1].get(module, 0)


def _unbindable(params: ast.arguments, call: ast.Call) -> str | None:
    """Why the arguments of ``call`` cannot bind to ``params``; None when they can or the
    call unpacks (``*xs``/``**kw``). An unknown keyword is GS244's."""
    if any(isinstance(a, ast.Starred) for a in call.args) or \
            any(k.arg is None for k in call.keywords):
        return None
    positional = [a.arg for a in (*params.posonlyargs, *params.args)]
    posonly = {a.arg for a in params.posonlyargs}
    keywords = [k.arg for k in call.keywords]
    known = (set(positional) - posonly) | {a.arg for a in params.kwonlyargs}
    if params.kwarg is None and any(k not in known for k in keywords):
        return None  # GS244 (unknown keyword), or a positional-only name given by keyword
    count = len(call.args)
    if count > len(positional) and params.vararg is None:
        return f"gets {count} positional arguments, takes {len(positional)}"
    bound = set(positional[:count])
    twice = next((k for k in keywords if k in bound), None)
    if twice is not None:
        return f"gets `{twice}` twice (by position and as `{twice}=`)"
    given = bound | set(keywords)
    required = positional[: len(positional) - len(params.defaults)]
    required += [a.arg for a, d in zip(params.kwonlyargs, params.kw_defaults) if d is None]
    missing = [p for p in required if p not in given]
    if missing:
        return f"missing `{short(missing[0], 24)}` ({count} positional given)"
    return None


def _plain(helper, owner, find) -> bool:
    """Whether ``helper`` is a module-level ``def`` of ``owner`` whose signature is the one a
    call binds to: bound once in its module, undecorated or wrapped by ``functools.wraps``
    decorators that pass every argument on."""
    if not isinstance(helper, ast.FunctionDef) or \
            owner.source.functions.get(helper.name) is not helper:
        return False
    if bindings(owner.source).get(helper.name, 0) != 1:
        return False
    return all(_passes_through(d, find) for d in helper.decorator_list)


def _passes_through(decorator: ast.expr, find) -> bool:
    """Whether a decorator is a linted ``def deco(fn)`` that returns a
    ``@functools.wraps(fn)`` wrapper ``(lead..., *args, **kwargs)`` calling
    ``fn(lead..., *args, **kwargs)`` (each tensor may be mapped, ``.contiguous()``, but the
    count and names are kept): the wrapped function binds its arguments as written."""
    deco = find(decorator)
    if not isinstance(deco, ast.FunctionDef) or len(deco.args.args) != 1 or \
            deco.args.vararg or deco.args.kwarg or deco.decorator_list:
        return False
    fn = deco.args.args[0].arg
    wrappers = [s for s in deco.body if isinstance(s, ast.FunctionDef)]
    if len(wrappers) != 1 or not any(
            isinstance(s, ast.Return) and isinstance(s.value, ast.Name)
            and s.value.id == wrappers[0].name for s in deco.body):
        return False
    wrapper = wrappers[0]
    if not any(_is_wraps(d, fn) for d in wrapper.decorator_list):
        return False
    args = wrapper.args
    if args.vararg is None or args.kwarg is None or args.kwonlyargs or args.posonlyargs \
            or args.defaults:
        return False
    calls = [n for n in ast.walk(wrapper) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Name) and n.func.id == fn]
    lead = [a.arg for a in args.args]
    return bool(calls) and all(_forwards(c, lead, args.vararg.arg, args.kwarg.arg)
                               for c in calls)


def _is_wraps(node: ast.expr, fn: str) -> bool:
    if not isinstance(node, ast.Call) or len(node.args) != 1:
        return False
    func = node.func
    named = (isinstance(func, ast.Name) and func.id == "wraps") or (
        isinstance(func, ast.Attribute) and func.attr == "wraps"
        and isinstance(func.value, ast.Name) and func.value.id == "functools")
    return named and isinstance(node.args[0], ast.Name) and node.args[0].id == fn


def _forwards(call: ast.Call, lead: list[str], star: str, stars: str) -> bool:
    """``fn(lead..., *<star, or one item per item of star>, **<stars, or one per item>)``."""
    if len(call.args) != len(lead) + 1 or len(call.keywords) != 1 or call.keywords[0].arg:
        return False
    if any(not (isinstance(a, ast.Name) and a.id == p) for a, p in zip(call.args, lead)):
        return False
    rest = call.args[-1]
    if not isinstance(rest, ast.Starred) or not _each(rest.value, star, False):
        return False
    return _each(call.keywords[0].value, stars, True)


def _each(node: ast.expr, name: str, items: bool) -> bool:
    """``name`` itself, or a comprehension over ``name`` (``name.items()``) with no ``if``:
    one value out for each value in."""
    if isinstance(node, ast.Name):
        return node.id == name
    if not isinstance(node, ast.DictComp if items else (ast.GeneratorExp, ast.ListComp)):
        return False
    if len(node.generators) != 1 or node.generators[0].ifs:
        return False
    source = node.generators[0].iter
    if items:
        return isinstance(source, ast.Call) and isinstance(source.func, ast.Attribute) \
            and source.func.attr == "items" and not source.args \
            and isinstance(source.func.value, ast.Name) and source.func.value.id == name
    return isinstance(source, ast.Name) and source.id == name


__all__ = ["GS249"]
