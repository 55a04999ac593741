"""GS125, GS225: calls that cannot do what the code says: an operator looked up through
``torch._C._jit_get_operation`` called as a function, and a wrapper named after one
Function of its module that applies another."""

from __future__ import annotations

import ast
import re

from gradsmith.linter._facts import Facts
from gradsmith.linter._registry import Rule, checker
from gradsmith.linter._symbols import dotted
from gradsmith.linter.rules._common import own, short

_H = "import torch\n\n\n"
_GRID = (
    "class GridSampleBackward(torch.autograd.Function):\n    @staticmethod\n"
    "    def forward(ctx, grad_output, input, grid):\n"
)
GS125 = Rule(
    "GS125", "jit-operation-tuple", "error",
    "The result of `torch._C._jit_get_operation(...)` is called as a function",
    "Since torch 1.13 `_jit_get_operation` returns a tuple (the operator and its overload "
    "names), not the operator: calling it raises TypeError ('tuple' object is not callable) "
    "every time this line runs.",
    "call the public operator (`torch.ops.aten.grid_sampler_2d_backward(...)`), or unpack "
    "the lookup first (`op, _ = torch._C._jit_get_operation(name)`). A module that tests "
    "`torch.__version__` is not reported: the lookup may be kept for an older torch behind "
    "a version gate.",
    bad=_H + _GRID + "        op = torch._C._jit_get_operation('aten::grid_sampler_2d_backward')\n"
    "        return op(grad_output, input, grid, 0, 0, False, (True, True))  # GS125\n\n"
    "    @staticmethod\n    def backward(ctx, gi, gg):\n        return None, None, None\n",
    good=_H + _GRID + "        op = torch.ops.aten.grid_sampler_2d_backward\n"
    "        return op(grad_output, input, grid, 0, 0, False, (True, True))\n\n"
    "    @staticmethod\n    def backward(ctx, gi, gg):\n        return None, None, None\n",
    brief="a `_jit_get_operation` lookup is a tuple: calling it raises TypeError",
)
_CUMSUM = (
    "class CumsumFunction(torch.autograd.Function):\n    @staticmethod\n"
    "    def forward(ctx, s):\n        return s.cumsum(-1)\n\n    @staticmethod\n"
    "    def backward(ctx, g):\n        return g.flip(-1).cumsum(-1).flip(-1)\n\n\n"
    "class ReversedCumsumFunction(torch.autograd.Function):\n    @staticmethod\n"
    "    def forward(ctx, s):\n        return s.flip(-1).cumsum(-1).flip(-1)\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        return g.cumsum(-1)\n\n\n"
)
GS225 = Rule(
    "GS225", "wrapper-applies-other-function", "warning",
    "A function named after one Function of its module applies another Function",
    "`reversed_cumsum()` beside `ReversedCumsumFunction` reads as its wrapper; applying "
    "`CumsumFunction` there computes another function and its gradient, silently (a "
    "copy-paste slip the shapes do not catch).",
    "apply the Function the wrapper is named after (or rename the wrapper if the other "
    "Function is meant).",
    bad=_H + _CUMSUM + "def reversed_cumsum(s):\n    return CumsumFunction.apply(s)  # GS225\n",
    good=_H + _CUMSUM + "def reversed_cumsum(s):\n    return ReversedCumsumFunction.apply(s)\n",
    scope="module",
    brief="wrapper applies a Function other than its name's",
)

_JIT_OP = ("_C", "_jit_get_operation")


@checker(GS125)
def check_jit_operation(facts: Facts, report) -> None:
    source = facts.fc.source
    skip = source.__dict__.get("_gs_no_jit_lookup")
    if skip is None:  # once per file, not once per Function of it: no lookup, or one kept
        # for an older torch behind a version gate (StyleGAN's conv2d_gradfix)
        text = source.text
        skip = source.__dict__["_gs_no_jit_lookup"] = (
            _JIT_OP[1] not in text or "__version__" in text)
    if skip:
        return
    for method in own(facts, "forward", "backward", "setup_context", "jvp", "vjp"):
        lookups: set[str] = set()  # names bound to a lookup in this method
        for node in _in_order(method.node):
            if isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
                if len(names) == len(node.targets):  # rebinding a name ends (or starts) it
                    lookups.difference_update(names)
                    if _is_lookup(node.value):
                        lookups.update(names)
            elif isinstance(node, ast.Call) and (
                _is_lookup(node.func)
                or isinstance(node.func, ast.Name) and node.func.id in lookups
            ):
                report("GS125", method.source, node, f"`{short(ast.unparse(node.func))}(...)`")


def _in_order(node: ast.AST):
    """Assignments and calls of a method in source order (an assignment before the calls
    in its own value, which is how they run)."""
    found = [n for n in ast.walk(node) if isinstance(n, (ast.Assign, ast.Call))]
    return sorted(found, key=lambda n: (n.lineno, n.col_offset, not isinstance(n, ast.Assign)))


def _is_lookup(expr: ast.expr) -> bool:
    parts = dotted(expr.func) if isinstance(expr, ast.Call) else None
    return bool(parts) and tuple(parts[-2:]) == _JIT_OP


#: What a Function's class name may add to the name of its wrapper.
_SUFFIX = re.compile(r"(Autograd)?(Function|Func|Fn|Op)$")


def _key(name: str, cls: bool = False) -> str:
    name = name.lstrip("_")
    if cls:
        name = _SUFFIX.sub("", name) or name
    return name.replace("_", "").lower()


@checker(GS225, scope="module")
def check_wrappers(target, report) -> None:
    src = target.source
    classes = [fc.name for fc in target.index.functions.values() if fc.source is src]
    if len(classes) < 2:
        return
    by_key: dict[str, str | None] = {}
    for name in classes:
        key = _key(name, cls=True)
        by_key[key] = None if key in by_key else name  # two classes of one key: ambiguous
    for stmt in src.tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names, body = [stmt.name], stmt
        elif isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets):
            names, body = [t.id for t in stmt.targets], stmt.value
        else:
            continue
        meant = next((by_key[k] for k in map(_key, names) if by_key.get(k)), None)
        if meant is None:
            continue
        named = [n for n in ast.walk(body) if isinstance(n, ast.Name) and n.id in classes]
        applied = [n.value for n in ast.walk(body) if isinstance(n, ast.Attribute)
                   and n.attr == "apply" and isinstance(n.value, ast.Name)
                   and n.value.id in classes]
        # A wrapper that names its own Function anyway (a factory returning the class) or
        # applies a variant of it (`delay` applying `_delayFunctionNoGradient`) is meant.
        if applied and all(n.id != meant for n in named) and not any(
            _key(meant, cls=True) in _key(n.id, cls=True) for n in applied
        ):
            report("GS225", src, applied[0],
                   f"`{short(applied[0].id, 22)}`, not `{short(meant, 22)}`")
