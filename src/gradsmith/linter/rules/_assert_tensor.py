"""GS245: the function that applies a Function asserts a tensor (``assert x.contiguous()``)."""

from __future__ import annotations

import ast

from gradsmith.linter._facts import Facts
from gradsmith.linter._registry import Rule, checker
from gradsmith.linter.rules._common import short

_H = "import torch\n\n\nclass Double(torch.autograd.Function):\n    @staticmethod\n" \
     "    def forward(ctx, x):\n        return x * 2\n\n    @staticmethod\n" \
     "    def backward(ctx, g):\n        return g * 2\n\n\ndef double(x):\n"
GS245 = Rule(
    "GS245", "assert-on-tensor", "warning",
    "the function that calls `Fn.apply` asserts a tensor-valued method of an argument it "
    "hands to apply (`assert x.contiguous()`)",
    "`x.contiguous()` returns a tensor, and `assert` calls `bool()` on it: for a tensor of "
    "more than one element that raises RuntimeError ('Boolean value of Tensor with more "
    "than one value is ambiguous'), so the Function cannot be used through its API (unless "
    "Python runs with -O, which drops the assert and the check meant by it).",
    "assert the predicate meant: `assert x.is_contiguous()`, or make it contiguous: "
    "`x = x.contiguous()`.",
    bad=_H + "    assert x.contiguous()  # GS245\n    return Double.apply(x)\n",
    good=_H + "    assert x.is_contiguous()\n    return Double.apply(x)\n",
    brief="assert on a tensor: RuntimeError for more than one element",
)

#: Tensor methods that return a tensor of the receiver's size (not a bool or a number).
_TENSOR_VALUED = frozenset(
    """contiguous clone detach float half double bfloat16 abs neg t cpu cuda""".split())


@checker(GS245)
def check_assert_on_tensor(facts: Facts, report) -> None:
    source = facts.fc.source
    for func, stmt in _tensor_asserts(source).get(facts.fc.node.name, ()):
        report("GS245", source, stmt, f"`{short(ast.unparse(stmt), 40)}` in `{func.name}()`")


def _tensor_asserts(source) -> dict[str, list[tuple[ast.FunctionDef, ast.Assert]]]:
    """Function name -> (module-level function, its top-level ``assert p.contiguous()``) where
    ``p`` is a parameter it hands to ``<name>.apply``; computed once per file."""
    found = source.__dict__.get("_gs_tensor_asserts")
    if found is not None:
        return found
    found = source.__dict__["_gs_tensor_asserts"] = {}
    if ".apply" not in source.text:
        return found
    for func in source.tree.body:
        if not isinstance(func, ast.FunctionDef):
            continue
        params = {a.arg for a in (*func.args.args, *func.args.kwonlyargs)}
        applied: dict[str, set[str]] = {}
        for n in ast.walk(func):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr == "apply" and isinstance(n.func.value, ast.Name):
                applied.setdefault(n.func.value.id, set()).update(
                    a.id for a in (*n.args, *(k.value for k in n.keywords))
                    if isinstance(a, ast.Name))
        for stmt in func.body:
            test = stmt.test if isinstance(stmt, ast.Assert) else None
            if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute)
                    and test.func.attr in _TENSOR_VALUED and not test.args
                    and isinstance(test.func.value, ast.Name)
                    and test.func.value.id in params):
                continue
            for name, args in applied.items():
                if test.func.value.id in args:
                    found.setdefault(name, []).append((func, stmt))
    return found


__all__ = ["GS245"]
