"""GS243: backward differentiates with respect to every parameter of a module, frozen ones
included."""

from __future__ import annotations

import ast

from gradsmith.linter._facts import Facts, torchish
from gradsmith.linter._registry import Rule, checker
from gradsmith.linter._symbols import dotted
from gradsmith.linter.rules._common import own, short

_H = "import torch\n\n\ndef make(net):\n    class Adjoint(torch.autograd.Function):\n" \
     "        @staticmethod\n        def forward(ctx, x):\n            ctx.save_for_backward(x)\n" \
     "            return net(x)\n\n        @staticmethod\n        def backward(ctx, g):\n" \
     "            (x,) = ctx.saved_tensors\n            with torch.enable_grad():\n" \
     "                x = x.detach().requires_grad_()\n                out = net(x)\n"
_T = "            return grads[0]\n\n    return Adjoint\n"
GS243 = Rule(
    "GS243", "grad-of-frozen-parameters", "warning",
    "backward calls torch.autograd.grad with respect to every `module.parameters()`, "
    "frozen ones included",
    "`torch.autograd.grad(out, (x, *net.parameters()), g)` raises RuntimeError ('One of "
    "the differentiated Tensors does not require grad') as soon as one parameter of the "
    "module is frozen (`requires_grad_(False)`, a fine-tuned or partly frozen model), "
    "`allow_unused=True` or not: backward fails on a configuration users often choose.",
    "differentiate only the parameters that require grad: `params = [p for p in "
    "net.parameters() if p.requires_grad]`, and give the others no gradient.",
    bad=_H + "                grads = torch.autograd.grad(out, (x, *net.parameters()), g)  # GS243\n"
    + _T,
    good=_H + "                params = [p for p in net.parameters() if p.requires_grad]\n"
    "                grads = torch.autograd.grad(out, (x, *params), g)\n" + _T,
    brief="grad of frozen parameters: RuntimeError",
)


@checker(GS243)
def check_grad_of_frozen_parameters(facts: Facts, report) -> None:
    resolve = torchish(facts.sym_of[id(facts.fc.source)])
    for method in own(facts, "backward"):
        for call in (n for n in ast.walk(method.node) if isinstance(n, ast.Call)):
            parts = dotted(call.func)
            if not parts or resolve(parts) not in (
                    "torch.autograd.grad", "torch.autograd.functional.vjp"):
                continue
            inputs = call.args[1] if len(call.args) > 1 else next(
                (k.value for k in call.keywords if k.arg == "inputs"), None)
            found = _unfiltered(inputs) if inputs is not None else None
            if found is not None:
                report("GS243", method.source, found,
                       f"`{short(ast.unparse(found), 40)}` in the inputs of "
                       f"`{short(ast.unparse(call.func), 24)}`")
                return


def _unfiltered(expr: ast.expr) -> ast.Call | None:
    """A ``m.parameters()`` call in ``expr`` that no comprehension condition or
    ``filter(...)`` selects from."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) \
            and expr.func.attr == "parameters" and not expr.args:
        return expr
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) \
            and expr.func.id == "filter":
        return None
    if isinstance(expr, (ast.ListComp, ast.GeneratorExp, ast.SetComp)) and any(
            g.ifs for g in expr.generators):
        return None
    for child in ast.iter_child_nodes(expr):
        found = _unfiltered(child) if isinstance(child, ast.expr) else None
        if found is not None:
            return found
    return None


__all__ = ["GS243"]
