"""GS244: forward or backward calls a linted helper with a keyword it has no parameter for."""

from __future__ import annotations

import ast

from gradsmith.linter._facts import Facts
from gradsmith.linter._kernels import finder
from gradsmith.linter._registry import Rule, checker
from gradsmith.linter.rules._common import own, short
from gradsmith.linter.rules._scope import enclosing_names, local_names

_H = "import torch\n\n\ndef _scale(x, factor=2.0):\n    return x * factor\n\n\n" \
     "class Scale(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
_B = "\n    @staticmethod\n    def backward(ctx, g):\n        return _scale(g)\n"
GS244 = Rule(
    "GS244", "helper-keyword", "error",
    "forward or backward calls a function of the linted code with a keyword argument it has "
    "no parameter for",
    "The helper is a plain `def` (no decorator that could change its signature, no "
    "`**kwargs`) and the call is a top-level statement of forward or backward: every call "
    "of the Function raises TypeError ('got an unexpected keyword argument'), typically "
    "after the helper's parameter was renamed (`interleaved` called as `interleave`).",
    "use the helper's parameter name, or add the parameter to the helper.",
    bad=_H + "        return _scale(x, scale=2.0)  # GS244\n" + _B,
    good=_H + "        return _scale(x, factor=2.0)\n" + _B,
    brief="no such keyword: TypeError",
)


@checker(GS244)
def check_helper_keywords(facts: Facts, report) -> None:
    find = finder(facts.sym_of[id(facts.fc.source)], facts.sym_of)
    for method, call in helper_calls(facts):
        helper = find(call.func)
        if not isinstance(helper, ast.FunctionDef) or helper.decorator_list \
                or helper.args.kwarg is not None:
            continue
        names = {a.arg for a in (*helper.args.args, *helper.args.kwonlyargs)}
        for kw in call.keywords:
            if kw.arg is not None and kw.arg not in names:
                report("GS244", method.source, kw.value,
                       f"`{kw.arg}=` for `{short(helper.name, 40)}()`")
                break


def helper_calls(facts: Facts):
    """``(method, call)`` for each call of a bare name forward or backward makes whenever it
    runs (a top-level statement), the name not a local or an enclosing function's: the
    module's helper, if the module binds it."""
    enclosing = enclosing_names(facts.fc.source, facts.fc.node)
    for method in own(facts, "forward", "backward"):
        shadowed = local_names(method.node) | enclosing
        for stmt in method.node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            for call in _calls(stmt):
                if call.func.id not in shadowed:
                    yield method, call


def _calls(stmt: ast.stmt) -> list[ast.Call]:
    """Calls of a plain name a statement makes whenever it runs (not in a nested block,
    lambda, comprehension or conditional expression)."""
    out: list[ast.Call] = []
    stack: list[ast.AST] = [stmt]
    while stack:
        node = stack.pop()
        if node is not stmt and isinstance(node, (ast.stmt, ast.Lambda, ast.IfExp, ast.BoolOp,
                                                  ast.ListComp, ast.SetComp, ast.DictComp,
                                                  ast.GeneratorExp)):
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            out.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return out


__all__ = ["GS244"]
