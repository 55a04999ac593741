"""Attributes of an argument that backward reads, for the config object synthesis invents
(private).

mri-nufft's ``_NUFFT_OP`` calls ``nufft_op.op(x)`` in forward and hands ``ctx.nufft`` to
helpers in backward that test ``nufft._grad_wrt_data`` and call ``nufft.adj_op(dy)``. A
namespace with forward's attributes alone made backward raise an ``AttributeError`` that was
gradsmith's invention. :func:`backward_attributes` reads what backward uses of the object,
directly (through ``ctx``) or in the functions of the package it hands it to; an attribute
only tested for truth is a flag, ``True`` (the branch that computes). Read, never run.
"""

from __future__ import annotations

import ast
from typing import Any

from gradsmith.discovery.callees import followed
from gradsmith.discovery.slots import Slot, _attribute_value
from gradsmith.discovery.source import parse as _parse
from gradsmith.discovery.source import stored_on_ctx
from gradsmith.discovery.uses import Use, _Reader


def with_backward_reads(plan: list[Slot], owner: Any) -> list[Slot]:
    """``plan`` with each invented config object given the attributes only backward reads."""
    out = []
    for slot in plan:
        if slot.kind == "config" and isinstance(slot.value, dict):
            extra = {a: (True if how == "bool" else _attribute_value(a, how))
                     for a, how in backward_attributes(owner, slot.name).items()
                     if a not in slot.value}
            if extra:
                slot = Slot(slot.name, "config", {**slot.value, **extra}, slot.hint,
                            frozen=slot.frozen)
        out.append(slot)
    return out


def backward_attributes(owner: Any, name: str) -> dict[str, str]:
    """Attributes of forward's parameter ``name`` that backward reads, directly (through
    ``ctx``) or in the functions of the package it hands the object to: attribute -> how
    (``"call"``, ``"int"``, ``"float"``, or ``"bool"`` for one only tested for truth, tried
    true: the branch that computes). Read, never run.

    Example:
        >>> import torch
        >>> def _grad(op, g):
        ...     return op.adjoint(g) if op.with_grad else None
        >>> class Apply(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x, op):
        ...         ctx.op = op
        ...         return op.apply(x)
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         return _grad(ctx.op, g), None
        >>> backward_attributes(Apply, "op")
        {'adjoint': 'call', 'with_grad': 'bool'}
    """
    backward = getattr(owner, "backward", None) if isinstance(owner, type) else None
    tree = _parse(backward)
    if tree is None:
        return {}
    stored: dict[str, str] = {}  # ctx attribute -> parameter
    for method in ("forward", "setup_context"):
        stored.update({a: p for a, p in stored_on_ctx(_parse(vars(owner).get(method)),
                                                      [name]).items() if p == name})
    if not stored:
        return {}

    def param_of(node: ast.AST, names: dict[str, str]) -> str | None:
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                node.value.id == "ctx":
            return stored.get(node.attr)
        return names.get(node.id) if isinstance(node, ast.Name) else None

    local = {t.id: name for node in ast.walk(tree) if isinstance(node, ast.Assign)
             and param_of(node.value, {}) == name for t in node.targets
             if isinstance(t, ast.Name)}  # op = ctx.op
    found: dict[str, str] = {}
    readers = [(tree, local, stored)]
    readers += [(helper, passed, {}) for helper, passed in followed(
        backward, tree, local, owner, param_of, package=True)]
    for code, names, ctx_attrs in readers:
        use = {name: Use()}
        _Reader(use, {k: v for k, v in names.items() if v == name}, ctx_attrs).visit(code)
        tested = _truth_tested(code, {k for k, v in names.items() if v == name})
        for attr, how in use[name].attrs.items():
            if attr not in use[name].assigned:
                found.setdefault(attr, "bool" if attr in tested and how == "float" else how)
    return dict(sorted(found.items()))


def _truth_tested(tree: ast.AST, names: set[str]) -> set[str]:
    """Attributes of ``names`` that ``tree`` tests for truth (``if not op.flag:``)."""
    tests = [n.test for n in ast.walk(tree) if isinstance(n, (ast.If, ast.IfExp, ast.While,
                                                               ast.Assert))]
    found = set()
    for test in tests:
        for node in ast.walk(test):
            if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
                node = node.operand
            elif isinstance(node, ast.BoolOp):
                continue
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                    node.value.id in names and _whole_test(test, node):
                found.add(node.attr)
    return found


def _whole_test(test: ast.AST, node: ast.AST) -> bool:
    """``node`` is ``test`` itself, or a ``not``/``and``/``or`` operand of it."""
    if test is node:
        return True
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _whole_test(test.operand, node)
    if isinstance(test, ast.BoolOp):
        return any(_whole_test(v, node) for v in test.values)
    return False
