"""Diagonal matrices, read from what backward returns (private).

An eigenvalue matrix handed in as ``diag(lambda)`` (DifferentiableSVD's ``Power``: forward
takes ``eig_diag.sqrt()`` of the whole matrix, backward returns
``0.5 * diag_embed(diagonal(...))`` for it) is a diagonal matrix by contract: on a full
random matrix forward's ``sqrt`` is NaN off the diagonal, and the gradient backward gives
(its diagonal only) is the derivative along diagonal directions, not along every entry.

Read, never run: a backward whose every ``return`` is a tuple and that returns, at the
position of a forward parameter, ``diag_embed(...)`` or ``diagflat(...)`` (possibly scaled:
``0.5 * diag_embed(d)``, ``s * diag_embed(d)``; directly, or through the name it last
assigned), and that reads the parameter's own diagonal (forward or backward: ``torch.diagonal(vals, dim1=1, dim2=2)``,
through aliases and what forward saves) sets that parameter's ``matrix = "diagonal"``: the
code takes the matrix's values from its diagonal and returns their gradient there. A
diagonal gradient alone could be a backward that forgot the off-diagonal part of a full
matrix, a bug, so it is not enough. :func:`~gradsmith.discovery.matrices.structured` then
builds a diagonal matrix, and :mod:`gradsmith.checker.diagonal` compares its gradient along
diagonal directions only (a wrong diagonal gradient still fails). A parameter another
reading already gave a structure (a solve, a Cholesky factor) keeps it.
"""

from __future__ import annotations

import ast
import inspect
from typing import Any

from gradsmith.discovery.source import call_name, parse

_BUILDERS = {"diag_embed", "diagflat"}


def read_diagonals(owner: Any, hints: dict) -> None:
    """Set ``hints[name].matrix = "diagonal"`` for the parameters of Function ``owner`` whose
    gradient backward builds as a diagonal matrix.

    Example:
        >>> import torch
        >>> from gradsmith.discovery.hints import Hint
        >>> class Root(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, vecs, vals):
        ...         ctx.save_for_backward(vecs, vals)
        ...         return vecs @ vals.sqrt() @ vecs.mT
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         vecs, vals = ctx.saved_tensors
        ...         d = torch.diagonal(vecs.mT @ g @ vecs, dim1=-2, dim2=-1)
        ...         d = d / torch.diagonal(vals, dim1=-2, dim2=-1).sqrt()
        ...         return (g + g.mT) @ vecs @ vals.sqrt(), 0.5 * torch.diag_embed(d)
        >>> hints = {"vecs": Hint(), "vals": Hint()}
        >>> read_diagonals(Root, hints)
        >>> hints["vecs"].matrix, hints["vals"].matrix
        (None, 'diagonal')
    """
    backward = parse(getattr(owner, "backward", None))
    params = _parameters(getattr(owner, "forward", None))
    if backward is None or not params:
        return
    returns = [n.value for n in ast.walk(backward) if isinstance(n, ast.Return)]
    if not returns or not all(isinstance(r, ast.Tuple) for r in returns):
        return
    assigned = _last_assignments(backward)
    forward = parse(getattr(owner, "forward", None))
    for position, name in enumerate(params):
        hint = hints.get(name)
        if hint is None or hint.matrix is not None or hint.kind not in (None, "tensor"):
            continue
        if all(position < len(r.elts) and _builds_diagonal(r.elts[position], assigned)
               for r in returns) and _reads_diagonal(forward, backward, name):
            hint.matrix = "diagonal"


def _reads_diagonal(forward: ast.AST | None, backward: ast.AST, name: str) -> bool:
    """Whether forward or backward reads the diagonal of parameter ``name`` (``torch.diagonal(
    vals, ...)``, ``vals.diagonal()``, ``torch.diag(vals)``; through forward's aliases, ``v =
    vals``, ``vecs, v = a, vals``, and what backward unpacks from ``ctx.saved_tensors``): the
    code takes the matrix's values from its diagonal. A gradient built diagonal for a matrix
    whose diagonal the code never reads (``x @ A`` with the off-diagonal gradient forgotten)
    is a bug, not a contract, and is compared entry by entry."""
    local = _aliases(forward, {name}) if forward is not None else {name}
    saved = _saved_positions(forward, local) if forward is not None else set()
    in_backward = set()
    for node in ast.walk(backward):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], (ast.Tuple, ast.List))
                and isinstance(node.value, ast.Attribute)
                and node.value.attr in ("saved_tensors", "saved_variables")):
            in_backward |= {e.id for i, e in enumerate(node.targets[0].elts)
                            if i in saved and isinstance(e, ast.Name)}
    return any(_diagonal_of(tree, names) for tree, names in
               ((forward, local), (backward, _aliases(backward, in_backward))) if tree)


def _aliases(tree: ast.AST, names: set[str]) -> set[str]:
    """``names`` and the names assigned from them as they are (``v = x``, ``a, v = y, x``)."""
    names = set(names)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target, value = node.targets[0], node.value
        pairs = [(target, value)]
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(
                target.elts) == len(value.elts):
            pairs = list(zip(target.elts, value.elts))
        for t, v in pairs:
            if isinstance(t, ast.Name) and isinstance(v, ast.Name) and v.id in names:
                names.add(t.id)
    return names


def _saved_positions(forward: ast.AST, names: set[str]) -> set[int]:
    for node in ast.walk(forward):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "save_for_backward"):
            return {i for i, a in enumerate(node.args)
                    if isinstance(a, ast.Name) and a.id in names}
    return set()


def _diagonal_of(tree: ast.AST, names: set[str]) -> bool:
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if (isinstance(func, ast.Attribute) and func.attr == "diagonal"
                and isinstance(func.value, ast.Name) and func.value.id in names):
            return True  # vals.diagonal(dim1=-2, dim2=-1)
        callee = call_name(node)
        if (callee in ("diagonal", "diag") and node.args and isinstance(node.args[0], ast.Name)
                and node.args[0].id in names):
            return True  # torch.diagonal(vals, dim1=1, dim2=2), torch.diag(vals)
    return False


def _parameters(forward: Any) -> list[str]:
    """Forward's parameters after ``ctx``, in order (``*args`` ends them)."""
    try:
        params = list(inspect.signature(forward).parameters.values())[1:]
    except (TypeError, ValueError):
        return []
    names = []
    for p in params:
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            break
        names.append(p.name)
    return names


def _last_assignments(tree: ast.AST) -> dict[str, ast.AST | None]:
    """Name -> the value of its only assignment in ``tree`` in source order's last place;
    None for a name also assigned by augmented assignment or in a tuple (not followed)."""
    found: dict[str, ast.AST | None] = {}
    nodes = sorted((n for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.AugAssign))),
                   key=lambda n: (n.lineno, n.col_offset))
    for node in nodes:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            if isinstance(target, ast.Name):
                found[target.id] = node.value if isinstance(node, ast.Assign) else None
            for inner in ast.walk(target) if not isinstance(target, ast.Name) else ():
                if isinstance(inner, ast.Name):
                    found[inner.id] = None
    return found


def _builds_diagonal(node: ast.AST | None, assigned: dict[str, ast.AST | None],
                     depth: int = 0) -> bool:
    """``diag_embed(d)``, ``diagflat(d)``, or an element-wise product with one (``0.5 *
    diag_embed(d)``, ``scale * diag_embed(d)``: zero where it is) or a quotient of one."""
    if depth > 4 or node is None:
        return False
    if isinstance(node, ast.Name):
        return _builds_diagonal(assigned.get(node.id), assigned, depth + 1)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return any(_builds_diagonal(side, assigned, depth + 1)
                   for side in (node.left, node.right))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return _builds_diagonal(node.left, assigned, depth + 1)
    if not isinstance(node, ast.Call):
        return False
    return call_name(node) in _BUILDERS
