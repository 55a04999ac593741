"""Arguments the code indexes by string keys: a mapping, not a tensor (private).

MPD-AGL's learnable surrogates take ``param`` and read ``ctx.param['tdBN_gammaAve']`` and
``torch.sqrt(1. + ctx.param['neuron_tau'] ** 2)`` in backward. A tensor is never indexed by a
string, so such an argument is a ``dict``, with one entry per key the code reads: an int where
only an int works (``range``, shifts, an index, an exponent), a 0-d float64 tensor where it is
handed to a function of the torch namespace (``torch.sqrt`` rejects a Python float), else a
float (each the key's usual value, see :func:`~gradsmith.discovery.slots._attribute_value`).
Read from forward, setup_context and, through what forward keeps on ctx, backward; never run.

Entries of a mapping only backward reads (forward keeps it on ctx and never looks inside) are 1:
backward scales its gradient by them (a surrogate's width, a gradient multiplier), and any
other value would make a gradient-mismatch of a value gradsmith chose, not one the code shows.
A loop count is 1 too: spigot's estimators read ``steps = ctx.config['gradient_update_steps']``
and loop ``for i in range(1, steps)`` through a decoder nothing describes; one step is the
estimator itself, with no extra loop (another int use, a shift or an index, keeps the key's
usual value: a bit width of 1 would be degenerate). A local name bound to an entry (``steps`` above) is used
as the entry is, so ``range(1, steps)`` makes it an int.
"""

from __future__ import annotations

import ast
from typing import Any

_INT_CALLS = {"range", "int"}
_RANK = {"int": 2, "count": 1}  # an int use wins over a count, a count over float or tensor
# an entry only backward reads is 1 (a float, or a 0-d tensor where torch takes it)
NEUTRAL = {"float": "neutral", "tensor": "neutral-tensor", "count": "neutral-int"}
_NAMESPACES = {"torch", "F", "functional"}


def read_keys(tree: ast.AST, found: dict[str, dict[str, str]], names: list[str],
              ctx_attrs: dict[str, str] | None = None) -> None:
    """Add to ``found`` each parameter's string keys read in ``tree``: key -> ``"int"``,
    ``"float"`` or ``"tensor"`` (how the entry is used). ``names``: the parameters (forward,
    setup_context); ``ctx_attrs``: ctx attribute -> parameter (backward).

    Example:
        >>> import ast
        >>> found = {}
        >>> read_keys(ast.parse("w = torch.sqrt(1. + ctx.p['tau'] ** 2) * ctx.p['gain']"),
        ...           found, [], {"p": "param"})
        >>> found
        {'param': {'tau': 'tensor', 'gain': 'float'}}
    """
    _Keys(found, {n: n for n in names}, ctx_attrs).visit(tree)
    if ctx_attrs is None:  # a loop count only matters where backward alone reads it
        for keys in found.values():
            keys.update({k: "int" for k, how in keys.items() if how == "count"})


class _Keys(ast.NodeVisitor):
    """Records ``p["key"]`` reads (``names``: local name -> parameter; ``ctx_attrs``: ctx
    attribute -> parameter, in backward)."""

    def __init__(self, found: dict[str, dict[str, str]], names: dict[str, str],
                 ctx_attrs: dict[str, str] | None = None) -> None:
        self.found, self.names, self.ctx_attrs = found, names, ctx_attrs or {}
        self.aliases: dict[str, tuple[str, str]] = {}  # local name -> (parameter, key)

    def visit_Assign(self, node: ast.Assign) -> None:
        """``steps = p["steps"]``: later uses of ``steps`` are uses of the entry."""
        got = self.keyed(node.value)
        for target in node.targets:
            if isinstance(target, ast.Name):
                if got is not None:
                    self.aliases[target.id] = got
                else:
                    self.aliases.pop(target.id, None)
        self.generic_visit(node)

    def keyed(self, node: ast.AST) -> tuple[str, str] | None:
        """(parameter, key) for ``p["key"]`` or ``ctx.p["key"]``, else None."""
        if not (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
                and isinstance(node.slice.value, str)):
            return None
        value = node.value
        if isinstance(value, ast.Name):
            name = self.names.get(value.id)
        elif isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and \
                value.value.id == "ctx":
            name = self.ctx_attrs.get(value.attr)
        else:
            name = None
        return (name, node.slice.value) if name is not None else None

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if (got := self.keyed(node)) is not None:
            self.found.setdefault(got[0], {}).setdefault(got[1], "float")
        else:
            self._mark(node.slice, "int")  # x[p["i"]]: an index
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        """``p.get("key", 1.0)``: a mapping; an entry with a constant default is left out
        (forward takes its default), one without is given like an indexed one."""
        if node.attr == "get" and (got := self.keyed(ast.Subscript(
                value=node.value, slice=ast.Constant("")))) is not None:
            self.found.setdefault(got[0], {})
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "get" and len(node.args) == 1 \
                and isinstance(node.args[0], ast.Constant) and \
                isinstance(node.args[0].value, str) and not node.keywords and \
                (got := self.keyed(ast.Subscript(value=func.value, slice=node.args[0]))):
            self.found.setdefault(got[0], {}).setdefault(got[1], "float")
        self._used_as(node)
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, (ast.LShift, ast.RShift, ast.FloorDiv, ast.Mod)):
            self._mark(node.left, "int")
            self._mark(node.right, "int")
        self.generic_visit(node)

    def _used_as(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in _INT_CALLS:
            for a in node.args:
                self._mark(a, "count" if func.id == "range" else "int")
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
                func.value.id in _NAMESPACES:
            for a in [*node.args, *(k.value for k in node.keywords)]:
                self._mark(a, "tensor")

    def _mark(self, node: ast.AST, how: str) -> None:
        for sub in ast.walk(node):
            got = self.aliases.get(sub.id) if isinstance(sub, ast.Name) else self.keyed(sub)
            if got is not None:
                keys = self.found.setdefault(got[0], {})
                if _RANK.get(keys.get(got[1]), 0) < _RANK.get(how, 0) or \
                        keys.get(got[1]) not in _RANK:  # an int use wins: a tensor cannot index
                    keys[got[1]] = how


def keyed_value(key: str, how: str) -> Any:
    """The value of one entry: the key's usual value as an int, a float or a 0-d float64
    tensor (see the module docstring)."""
    import torch

    from gradsmith.discovery.slots import _attribute_value

    if how == "neutral":
        return 1.0
    if how == "neutral-int":
        return 1
    if how == "count":
        how = "int"
    if how == "neutral-tensor":
        return torch.tensor(1.0, dtype=torch.float64)
    if how == "tensor":
        return torch.tensor(_attribute_value(key, "float"), dtype=torch.float64)
    return _attribute_value(key, how)
