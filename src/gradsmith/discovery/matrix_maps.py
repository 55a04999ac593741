"""Arguments that are a linear map's matrix in disguise: a flagged map and a weight's source.

Quantised-layer Functions hand forward the layer's means of applying its weight rather than
the weight: ``matmul(x, transpose=True)`` in forward and ``ctx.matmul(g, transpose=False)``
in backward (one callable, the map and its adjoint told apart by a keyword), or
``dequantize()`` / ``hqq_layer.dequantize()``, which give the weight matrix itself. Nothing but
that use says what they are. An invented nonlinear function (``tanh``) makes a correct
backward look wrong, and a float tensor passed for the layer (a tensor happens to have
``.dequantize()``) is not what the code is written for. So the stand-ins are
:class:`~gradsmith.discovery.operators.LinearStandIn` ones of a seeded random square matrix
``M`` (not symmetric): the flagged callable is ``x @ M.T`` under forward's flag and ``y @ M``
under the other, so a backward applying the map where its adjoint belongs still fails; a
weight source gives ``M``, so a backward multiplying by ``M.T`` where ``M`` belongs fails too.
Read, never run.
"""

from __future__ import annotations

import ast
from typing import Any

from gradsmith.discovery.operators import Operator
from gradsmith.discovery.source import method_trees, read_parameter, stored_on_ctx

# Keywords that say map or adjoint (words of the name: transpose_b, adjoint).
_FLAG_WORDS = {"transpose", "transposed", "trans", "adjoint", "adj", "t", "hermitian"}
# Tensor methods that mean something on quantised tensors only: on a float tensor
# ``.dequantize()`` is the identity, so a float tensor is not what code calling it expects.
_QUANTISED_ONLY = {"dequantize", "int_repr", "qscheme"}


def flagged_maps(owner: Any, names: list[str]) -> dict[str, Operator]:
    """Each argument forward calls on one tensor with a transpose flag (``matmul(x,
    transpose=True)``) and backward applies to its incoming gradient with that flag
    (``ctx.matmul(g, transpose=False)``): a linear map and its adjoint in one callable, the
    map under forward's value. A backward passing forward's value applies the map where the
    adjoint belongs, and fails.

    Example:
        >>> import torch
        >>> class Mul(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x, mm):
        ...         ctx.mm = mm
        ...         return mm(x, transpose=True)
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         return ctx.mm(g, transpose=False), None
        >>> op = flagged_maps(Mul, ["x", "mm"])["mm"]
        >>> op.called, op.flag, op.flag_map
        (True, 'transpose', True)
    """
    trees = method_trees(owner)
    forward, backward = trees.get("forward"), trees.get("backward")
    if forward is None or backward is None:
        return {}
    stored = _stored(trees, names)
    local = _aliases(backward, stored)
    grads = _grad_names(backward)
    found = {}
    for name in names:
        ahead = [c for c in _calls(forward, {n: n for n in names}, {}, name)]
        back = [c for c in _calls(backward, local, stored, name)]
        flags = {_flag(c) for c in ahead}
        if not ahead or not back or len(flags) != 1 or None in flags:
            continue
        (word, value), = flags
        if any(len(c.args) != 1 or isinstance(c.args[0], ast.Starred) for c in ahead + back):
            continue
        if all(_flag(c) is not None and _flag(c)[0] == word and _reads(c.args[0], grads)
               for c in back):
            found[name] = Operator(called=True, flag=word, flag_map=value)
    return found


def matrix_givers(owner: Any, names: list[str], frozen: set[str]) -> dict[str, Operator]:
    """Each argument backward gives no gradient (``frozen``) that the code only calls with no
    argument (``dequantize()``) or only asks, with no argument, for a method a float tensor
    lacks or has for quantised tensors alone (``hqq_layer.dequantize()``): a source of a
    weight matrix, not a tensor or a function of tensors.

    Example:
        >>> import torch
        >>> class Deq(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x, layer):
        ...         w = layer.dequantize()
        ...         ctx.save_for_backward(w)
        ...         return x @ w.t()
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         w, = ctx.saved_tensors
        ...         return g @ w, None
        >>> matrix_givers(Deq, ["x", "layer"], {"layer"})["layer"].gives
        ('dequantize',)
        >>> matrix_givers(Deq, ["x", "layer"], set())
        {}
    """
    import torch

    trees = method_trees(owner)
    forward = trees.get("forward")
    if forward is None or not frozen:
        return {}
    stored = _stored(trees, names)
    backward = trees.get("backward")
    views = [(forward, {n: n for n in names}, {})]
    if backward is not None:
        views.append((backward, _aliases(backward, stored), stored))
    found = {}
    for name in sorted(frozen & set(names)):
        gives: set[str] = set()
        for tree, local, seen in views:
            got = _gives(tree, local, seen, name)
            gives = gives | got if got is not None and gives is not None else None
            if gives is None:
                break
        if not gives or ("" in gives and len(gives) > 1):
            continue
        tensor_methods = set(dir(torch.Tensor)) - _QUANTISED_ONLY
        if gives & tensor_methods:
            continue  # x.t(), x.float(): a tensor's
        found[name] = Operator(called="" in gives, gives=tuple(sorted(gives)))
    return found


def _gives(tree: ast.AST, local: dict[str, str], stored: dict[str, str],
           name: str) -> set[str] | None:
    """What ``tree`` asks of parameter ``name``: ``""`` for a call with no argument, a
    method's name for a method called with none; None when it uses it any other way (an
    argument of a call, arithmetic, an attribute read)."""
    parents = {id(c): p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
    gives: set[str] = set()
    for node in ast.walk(tree):
        if not (isinstance(node, (ast.Name, ast.Attribute))
                and read_parameter(node, local, stored) == name):
            continue
        if not isinstance(node.ctx, ast.Load):
            continue  # ctx.layer = layer: the store, read above
        parent = parents.get(id(node))
        if isinstance(parent, ast.Assign) and parent.value is node:
            continue  # ctx.layer = layer, layer = ctx.layer
        if isinstance(parent, ast.Call) and parent.func is node:
            if parent.args or parent.keywords:
                return None
            gives.add("")
            continue
        call = parents.get(id(parent))
        if (isinstance(parent, ast.Attribute) and isinstance(call, ast.Call)
                and call.func is parent and not call.args and not call.keywords):
            gives.add(parent.attr)
            continue
        return None
    return gives


def _stored(trees: dict[str, ast.AST], names: list[str]) -> dict[str, str]:
    stored: dict[str, str] = {}
    for method in ("forward", "setup_context"):
        stored.update(stored_on_ctx(trees.get(method), names))
    return stored


def _aliases(tree: ast.AST, stored: dict[str, str]) -> dict[str, str]:
    """Backward's local names for stored parameters (``mm = ctx.mm``)."""
    local: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and (name := read_parameter(node.value, {}, stored)):
            local.update({t.id: name for t in node.targets if isinstance(t, ast.Name)})
    return local


def _calls(tree: ast.AST, local: dict[str, str], stored: dict[str, str],
           name: str) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)
            and read_parameter(n.func, local, stored) == name]


def _flag(call: ast.Call) -> tuple[str, bool] | None:
    """The call's one transpose keyword and its constant value, else None."""
    flags = [(k.arg, k.value.value) for k in call.keywords
             if k.arg and set(k.arg.lower().split("_")) & _FLAG_WORDS
             and isinstance(k.value, ast.Constant) and isinstance(k.value.value, bool)]
    return flags[0] if len(flags) == 1 and len(call.keywords) == 1 else None


def _grad_names(tree: ast.AST) -> set[str]:
    defs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    if not defs:
        return set()
    arguments = defs[0].args
    return {a.arg for a in arguments.args[1:]} | (
        {arguments.vararg.arg} if arguments.vararg else set())


def _reads(node: ast.AST, grads: set[str]) -> bool:
    """Whether ``node`` reads backward's incoming gradient (``g``, ``grad_output[0] * 2``)."""
    return any(isinstance(m, ast.Name) and m.id in grads for m in ast.walk(node))
