"""GS207's other shape: backward returns a gradient built by ``torch.tensor(...)`` (or
``as_tensor``, ``from_numpy``) from what a function outside torch computed
(``torch.tensor(iisignature.sigbackprop(grad.cpu(), ...))``): the values come from outside
autograd, so the gradient has no graph and second derivatives are silently missing."""

from __future__ import annotations

import ast
import builtins

from gradsmith.linter._symbols import dotted

_FROM_DATA = frozenset({"torch.tensor", "torch.as_tensor", "torch.from_numpy"})
_BUILTINS = frozenset(dir(builtins))


def raw_gradient(call: ast.Call, qual: str | None, parents: dict[int, ast.AST],
                 resolve) -> bool:
    """``call`` is ``torch.tensor(f(...))`` with ``f`` neither torch's nor a builtin (nor a
    method, such as ``x.tolist()``), and it is part of what a ``return`` gives."""
    if qual not in _FROM_DATA or not call.args or not isinstance(call.args[0], ast.Call):
        return False
    parts = dotted(call.args[0].func)
    if not parts or len(parts) == 1 and parts[0] in _BUILTINS or resolve(parts) is not None:
        return False
    if len(parts) == 1 and parts[0][:1].isupper():
        return False  # a class: a handle, a config
    node: ast.AST | None = call
    while node is not None and not isinstance(node, ast.stmt):
        node = parents.get(id(node))
    return isinstance(node, ast.Return)


__all__ = ["raw_gradient"]
