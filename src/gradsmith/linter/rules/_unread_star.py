"""GS122's other shapes: output gradients backward takes in ``*args`` and never reads, or
unpacks into ``_`` (``(grad_output, _) = grad_outputs``), while forward returns a tensor
there that can carry a gradient (``return out if not return_lse else (out, lse)``)."""

from __future__ import annotations

import ast

from gradsmith.linter._flow import walk_shallow
from gradsmith.linter.rules._fallthrough import _items


def returned_items(forward) -> list[list[ast.expr]]:
    """Every tuple forward can return, as lists of items: both sides of a conditional
    (``out if not flag else (out, lse)``) and a name bound to a tuple (``return outs``)."""
    bound: dict[str, list[ast.expr]] = {}
    for node in walk_shallow(forward.node):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                node.targets[0], ast.Name):
            bound.setdefault(node.targets[0].id, []).append(node.value)
    found: list[list[ast.expr]] = []
    stack = [n.value for n in walk_shallow(forward.node)
             if isinstance(n, ast.Return) and n.value is not None]
    seen = 0
    while stack and seen < 64:
        seen += 1
        value = stack.pop()
        if isinstance(value, ast.IfExp):
            stack += [value.body, value.orelse]
        elif isinstance(value, ast.Name) and len(bound.get(value.id, ())) == 1 and isinstance(
                bound[value.id][0], (ast.Tuple, ast.List)):
            stack.append(bound[value.id][0])
        else:
            items = _items(value)
            found.append(items if items is not None else [value])
    return found


def ignored_positions(bwd) -> dict[int, ast.AST] | None:
    """Output positions whose gradient backward's ``*args`` swallows unread, each with the
    node to point at (None: the ``*args`` itself); None when it reads them some other way."""
    vararg = bwd.node.args.vararg
    if vararg is None:
        return {}
    first = len(bwd.params) - 1
    loads = [n for n in ast.walk(bwd.node) if isinstance(n, ast.Name) and n.id == vararg.arg
             and isinstance(n.ctx, ast.Load)]
    if not loads:
        return {first + i: None for i in range(32)}
    unpacks = [s for s in bwd.node.body if isinstance(s, ast.Assign) and isinstance(
        s.value, ast.Name) and s.value.id == vararg.arg and len(s.targets) == 1
        and isinstance(s.targets[0], (ast.Tuple, ast.List))
        and all(isinstance(e, ast.Name) for e in s.targets[0].elts)]
    if len(unpacks) != len(loads):
        return None  # `grad_outputs[0]`, handed on: it may read every one
    read = {n.id for n in ast.walk(bwd.node) if isinstance(n, ast.Name)
            and isinstance(n.ctx, (ast.Load, ast.Del))}
    out: dict[int, ast.AST] = {}
    for stmt in unpacks:
        for i, elt in enumerate(stmt.targets[0].elts):
            if elt.id not in read:
                out.setdefault(first + i, elt)
    return out


def used_as_integers(forward, item: ast.expr) -> bool:
    """Forward reads the returned ``item`` as integers: ``sizes.tolist()``, ``n.item()``,
    ``idx.long()`` (``batch_sizes`` gathered with the tensor, split by later): an output
    no loss differentiates, so dropping its gradient on purpose is fine."""
    if not isinstance(item, ast.Name):
        return False
    return any(isinstance(n, ast.Attribute) and n.attr in _INTEGER_USES and isinstance(
        n.value, ast.Name) and n.value.id == item.id for n in ast.walk(forward.node))


_INTEGER_USES = frozenset({"tolist", "item", "long", "int"})

__all__ = ["ignored_positions", "returned_items", "used_as_integers"]
