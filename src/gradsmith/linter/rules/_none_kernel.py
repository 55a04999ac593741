"""GS236: backward hands a value to a compiled kernel on the branch where it is None."""

from __future__ import annotations

import ast

from gradsmith.linter import _extensions
from gradsmith.linter._facts import Facts
from gradsmith.linter._kernels import finder, launched
from gradsmith.linter._registry import Rule, checker
from gradsmith.linter.rules._common import own, short
from gradsmith.linter.rules._kernels import _Lazy, _opaque

_H = ("import torch\nfrom torch.autograd.function import once_differentiable\n"
      "from torch.utils.cpp_extension import load\n\next = load(name='ext', sources=['ext.cpp'])"
      "\n\n\nclass Spmm(torch.autograd.Function):\n    @staticmethod\n"
      "    def forward(ctx, x, weight=None):\n        ctx.weight = weight\n"
      "        if weight is None:\n            return ext.spmm_unweighted(x)\n"
      "        return ext.spmm(x, weight)\n\n    @staticmethod\n    @once_differentiable\n"
      "    def backward(ctx, g):\n        weight = ctx.weight\n")
GS236 = Rule(
    "GS236", "none-to-kernel", "warning",
    "backward passes a value to a compiled kernel on the branch where that value is None",
    "The branch runs only when the value is None (`if w is None:`, the `else` of `if w is "
    "not None:`), typically an optional input forward accepted as None (and forward itself "
    "called another kernel for that case). A C++/CUDA function whose parameter is a "
    "`torch::Tensor` rejects None with a TypeError, so backward fails for every caller that "
    "leaves the input out; only a parameter declared optional (`c10::optional<Tensor>`) "
    "accepts it, which a reader of the Python side cannot see (a warning, not an error).",
    "call the kernel variant for the missing value there (as forward does), or pass a "
    "tensor (`torch.ones_like(...)`, an empty tensor) the kernel can read.",
    bad=_H + "        if weight is None:\n"
    "            return ext.spmm_backward(g, weight), None  # GS236\n"
    "        return ext.spmm_backward(g, weight), None\n",
    good=_H + "        if weight is None:\n"
    "            return ext.spmm_unweighted_backward(g), None\n"
    "        return ext.spmm_backward(g, weight), None\n",
    brief="a None value passed to a compiled kernel",
)


@checker(GS236)
def check_none_to_kernel(facts: Facts, report) -> None:
    sym = facts.sym_of[id(facts.fc.source)]
    find = finder(sym, facts.sym_of)
    for method in own(facts, "backward", "vjp"):
        if "None" not in (method.source.segment(method.node) or ""):
            continue
        scope = _extensions.Scope(sym, facts.sym_of, _extensions.names(sym, facts.sym_of))
        scope = scope.with_locals(method.node)
        local = _Lazy(method.node, frozenset(scope.known))
        seen: set[str] = set()

        def check(call: ast.Call, nones: frozenset[str], method=method, seen=seen, local=local,
                  scope=scope) -> None:
            passed = [a.id for a in call.args if isinstance(a, ast.Name) and a.id in nones]
            if not passed or passed[0] in seen or launched(call) is not None \
                    or not _opaque(call, find, local, scope):
                return  # a Triton launch takes None (specialised as a constant)
            seen.add(passed[0])
            kernel = short(ast.unparse(call.func), 40)
            report("GS236", method.source, call, f"`{passed[0]}` (None here) to `{kernel}()`")

        _visit(method.node.body, frozenset(), check)


def _visit(body: list[ast.stmt], nones: frozenset[str], check) -> None:
    """Walk ``body`` knowing which names are None, calling ``check`` on each call."""
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(stmt, ast.If):
            _calls(stmt.test, nones, check)
            name, is_none = _none_test(stmt.test)
            if name is None:
                _visit(stmt.body, nones, check)
                _visit(stmt.orelse, nones, check)
            else:
                _visit(stmt.body, nones | {name} if is_none else nones - {name}, check)
                _visit(stmt.orelse, nones - {name} if is_none else nones | {name}, check)
            nones = nones - _bound([stmt])
            continue
        blocks = [getattr(stmt, n, None) for n in ("body", "orelse", "finalbody")]
        blocks += [h.body for h in getattr(stmt, "handlers", ())]
        blocks = [b for b in blocks if isinstance(b, list)]
        if blocks:  # loops, with, try: their heads here, their bodies with what is known
            for field in ("iter", "test", "items"):
                part = getattr(stmt, field, None)
                for sub in part if isinstance(part, list) else [part] if part else []:
                    _calls(sub, nones, check)
            inner = nones - _bound([stmt])  # a loop body may run after its own rebinding
            for block in blocks:
                _visit(block, inner, check)
        else:
            _calls(stmt, nones, check)
        nones = nones - _bound([stmt])


def _calls(node: ast.AST, nones: frozenset[str], check) -> None:
    if not nones:
        return
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            check(sub, nones)


def _none_test(test: ast.expr) -> tuple[str | None, bool]:
    """(name, True) for ``name is None``, (name, False) for ``name is not None``."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(
            test.left, ast.Name) and isinstance(test.comparators[0], ast.Constant) \
            and test.comparators[0].value is None:
        if isinstance(test.ops[0], ast.Is):
            return test.left.id, True
        if isinstance(test.ops[0], ast.IsNot):
            return test.left.id, False
    return None, False


def _bound(stmts: list[ast.stmt]) -> frozenset[str]:
    """Names (re)bound anywhere in ``stmts``."""
    return frozenset(n.id for s in stmts for n in ast.walk(s)
                     if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))


__all__ = ["GS236"]
