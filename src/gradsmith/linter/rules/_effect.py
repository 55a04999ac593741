"""A call backward makes for its effect alone (its result unused) that is handed a saved
intermediate and the output's gradient, after which that saved tensor is returned as a
gradient: the call filled it in place (``F.cross_entropy_backward_inplace(g, target,
softmax)`` then ``return softmax, None``). A kernel that writes its argument in place does
not always bump its version counter, so a second backward may silently start from the
gradient instead of what forward saved (GS227)."""

from __future__ import annotations

import ast

from gradsmith.linter._flow import Flow, walk_shallow
from gradsmith.linter._symbols import dotted


def returned_names(method: ast.AST) -> frozenset[str]:
    """Names a ``return`` of ``method`` gives bare, alone or as a tuple item."""
    found = method.__dict__.get("_gs_returned_names")
    if found is None:
        names = set()
        for sub in walk_shallow(method):
            if isinstance(sub, ast.Return) and sub.value is not None:
                items = sub.value.elts if isinstance(sub.value, ast.Tuple) else [sub.value]
                names.update(i.id for i in items if isinstance(i, ast.Name))
        found = method.__dict__["_gs_returned_names"] = frozenset(names)
    return found


def filled_for_effect(stmt: ast.stmt, flow: Flow, returned: frozenset[str], helpers
                      ) -> list[tuple[ast.Call, ast.Name]]:
    """(call, saved argument) when ``stmt`` is a call for effect alone, not torch's and not a
    linted helper whose body shows its writes (those are read as such), given the output's
    gradient and a saved intermediate backward returns afterwards as a gradient."""
    if not isinstance(stmt, ast.Expr) or not isinstance(stmt.value, ast.Call) or not returned:
        return []
    call = stmt.value
    parts = dotted(call.func)
    if not parts or parts[0] in flow.env or flow.torchish(parts) is not None:
        return []  # a local callable, or torch's own function (its writes are known)
    if helpers is not None and helpers(call):
        return []  # a linted helper: its body says what it writes
    args = [*call.args, *(k.value for k in call.keywords)]
    if not any("grad" in flow.eval(a).origins for a in args if not isinstance(a, ast.Starred)):
        return []
    return [(call, a) for a in args if isinstance(a, ast.Name) and a.id in returned
            and "saved:fresh" in flow.eval(a).origins and "grad" not in flow.eval(a).origins]


__all__ = ["filled_for_effect", "returned_names"]
