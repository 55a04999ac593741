"""Read the contract a Function is written for from its forward and backward (private).

Two guesses that synthesis makes better by reading the code (never running it):

- a forward argument stored on ctx as it is (``ctx.alpha = alpha``) for which backward returns
  ``None``, or passed to ``float()``, is a Python number (a hyperparameter such as
  ``bias_init``), not a tensor: made a tensor it gives a false ``tensor-on-ctx`` or a false
  gradient-mismatch;
- a per-feature parameter (``weight``, ``bias``, ``gamma``, ``beta``, ``scale``) whose gradient
  backward reduces (``g.sum(0)``, ``.mean(0)``, ``view(-1, C).sum(0)``) or that forward
  broadcasts explicitly (``weight.unsqueeze(0)``, ``bias.expand_as(x)``) is 1-D of the input's
  last dimension: made the input's full shape, a correct Function gets grad-shape-mismatch.
"""

from __future__ import annotations

import ast

from gradsmith.discovery.hints import Hint, _param_of
from gradsmith.discovery.source import forward_parameters
from gradsmith.discovery.source import parse as _parse

_PER_FEATURE = {"weight", "bias", "gamma", "beta", "scale"}
_REDUCTIONS = {"sum", "mean"}
_BROADCASTS = {"unsqueeze", "expand", "expand_as", "view_as", "reshape_as"}


def _backward_returns(owner: type) -> list[list[ast.AST]]:
    """Each ``return`` of backward as its elements, names replaced by what they were assigned."""
    tree = _parse(getattr(owner, "backward", None))
    if tree is None:
        return []
    assigned: dict[str, ast.AST] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                node.targets[0], ast.Name):
            assigned[node.targets[0].id] = node.value
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Return) and node.value is not None:
            elts = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            found.append([assigned.get(e.id, e) if isinstance(e, ast.Name) else e
                          for e in elts])
    return found


def _reduces(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr in _REDUCTIONS for n in ast.walk(node))


def per_feature_params(owner: type | None, hints: dict[str, Hint]) -> set[str]:
    """Parameters named like per-feature vectors that the code treats as one.

    Example:
        >>> import torch
        >>> class BiasAdd(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x, bias):
        ...         return x + bias
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         return g, g.sum(0)
        >>> per_feature_params(BiasAdd, {"x": Hint(), "bias": Hint()})
        {'bias'}
    """
    if owner is None:
        return set()
    params = forward_parameters(owner)
    named = {p for p in params if p in hints and _feature_name(p)
             and hints[p].kind in (None, "tensor") and not _in_matmul(p, hints)}
    if not named:
        return set()
    found = set()
    for elts in _backward_returns(owner):
        for i, e in enumerate(elts):
            if i < len(params) and params[i] in named and _reduces(e):
                found.add(params[i])
    for method in ("forward", "setup_context"):
        tree = _parse(vars(owner).get(method))
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in _BROADCASTS:
                name = _param_of(node.func.value, hints)
                if name in named:
                    found.add(name)
    return found


def _feature_name(name: str) -> bool:
    word = name.lower().rstrip("_").rsplit("_", 1)[-1]
    return word in _PER_FEATURE


def _in_matmul(name: str, hints: dict[str, Hint]) -> bool:
    return hints[name].matmul_left_of is not None or any(
        h.matmul_left_of == name for h in hints.values())


def scalar_params(owner: type | None, hints: dict[str, Hint], frozen: set[str]) -> set[str]:
    """Parameters the code uses as a Python number: passed to ``float()``, listed in a tensor
    it builds (``torch.tensor([gama])``) while backward returns ``None`` for them, or stored on ctx as
    they are (``ctx.coef = coef``, ``ctx.bounds = (lo, hi)``) while backward returns ``None``
    for them or, in the setup_context style, forward never reads them (and nothing uses them
    as a tensor).

    Example:
        >>> import torch
        >>> class Scaled(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x, coef):
        ...         ctx.coef = coef
        ...         return x * coef
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         return g * ctx.coef, None
        >>> scalar_params(Scaled, {"x": Hint(), "coef": Hint()}, {"coef"})
        {'coef'}
    """
    if owner is None:
        return set()
    unknown = {n for n, h in hints.items() if h.kind is None}
    found: set[str] = set()
    for method in ("forward", "setup_context"):
        tree = _parse(vars(owner).get(method))
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                    node.func.id == "float" and node.args:
                name = _param_of_exact(node.args[0], unknown)
                found |= {name} if name else set()
            elif _wraps_numbers(node):  # torch.tensor([gama]): gama is a number
                found |= {e.id for e in node.args[0].elts
                          if isinstance(e, ast.Name)} & unknown & frozen
            elif isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Attribute) for t in node.targets):
                stored = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
                names = {e.id for e in stored if isinstance(e, ast.Name)} & unknown
                found |= names & (frozen | (_unread_by_forward(owner, names)
                                            if method == "setup_context" else set()))
    return found


def _wraps_numbers(node: ast.AST) -> bool:
    """``torch.tensor([a, b])`` / ``x.new_tensor([a])``: a list of numbers made a tensor."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
        node.func.attr in ("tensor", "Tensor", "new_tensor") and len(node.args) == 1 and \
        isinstance(node.args[0], (ast.List, ast.Tuple))


def _unread_by_forward(owner: type, names: set[str]) -> set[str]:
    """Of ``names``, the parameters a setup_context-style forward never reads: stored on ctx
    for backward only (``leak``, ``k`` of a surrogate spike), hyperparameters, not data."""
    tree = _parse(vars(owner).get("forward"))
    if tree is None:
        return set()
    read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(
        n.ctx, ast.Load)}
    return names - read


def _param_of_exact(node: ast.AST, names: set[str]) -> str | None:
    return node.id if isinstance(node, ast.Name) and node.id in names else None

