"""What kind of non-tensor value an argument is, read from how the code uses it (private).

Synthesis made every argument it could not name a float tensor; these uses say otherwise
(read from forward, setup_context and backward, never by running them):

- a **config object**: forward reads attributes that tensors do not have (``cfg.num_bits``,
  ``qparams.quantize(x)``): a ``SimpleNamespace`` with those attributes, each an int, a float
  or a plain function by how it is used;
- **sections**: a list of ints passed to ``torch.split(x, sections, dim)`` that the code also
  treats as a sequence (``len``, ``enumerate``, ``for s in``, ``sum``, ``sections[i]``, a
  ``List[int]`` annotation): sizes that sum to the split dimension;
- a **size**: ``torch.Size`` annotated, or the one argument of ``x.view(shape)``, ``reshape``...
- a **mapping**: indexed by string constants (``param['neuron_Vth']``): a ``dict`` of those
  keys (see :mod:`~gradsmith.discovery.keyed`);
- a **flag**: only ever tested for truth (``if flag:``, ``not flag``, ``bool(flag)``), also on
  ctx in backward: a bool, tried both ways (see :mod:`~gradsmith.discovery.flags`);
- a **plain function**: a callable forward calls (``act(x)``) neither named nor used like a
  module (``.parameters()``, ``.forward``): a parameter-free tensor-to-tensor function.

Attributes read only behind ``hasattr`` are optional (:mod:`~gradsmith.discovery.optional_attrs`).
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass, field
from typing import Any

from gradsmith.discovery.flags import truth_tested
from gradsmith.discovery.hints import _TENSOR_ATTRS
from gradsmith.discovery.keyed import NEUTRAL, read_keys
from gradsmith.discovery.optional_attrs import drop_optional, hasattr_tested
from gradsmith.discovery.source import parse as _parse
from gradsmith.discovery.source import stored_on_ctx

_SHAPE_METHODS = {"view", "reshape", "expand", "new_zeros", "new_ones", "new_empty"}
_SHAPE_FUNCTIONS = {"zeros", "ones", "empty", "randn", "rand", "Size"}
_SEQUENCE_FUNCTIONS = {"len", "enumerate", "sum", "zip", "list", "tuple", "reversed"}
_MODULE_ATTRS = {"forward", "parameters", "named_parameters", "modules", "train", "eval",
                 "zero_grad", "weight", "bias"}
_MODULE_WORDS = {"module", "layer", "block", "net", "model", "fm", "gm", "fn", "func",
                 "function", "run_function"}


@dataclass
class Use:
    """How the code uses one argument (empty: nothing here says it is not a tensor)."""

    attrs: dict[str, str] = field(default_factory=dict)  # name -> "int" | "float" | "call"
    tensor_attrs: bool = False       # also reads x.shape, x.sum(): a tensor after all
    split_dim: int | None = None     # torch.split(x, it, dim)
    sequence: bool = False           # len(it), for s in it, it[i], List[int]
    size: bool = False               # x.view(it), torch.zeros(it), torch.Size annotation
    module: bool = False             # it.parameters(), it.forward(...), a module's name
    foreign: bool = False            # reads an attribute tensors do not have (cfg.num_bits)
    boolean: bool = False            # only ever tested for truth (if it:, not it, bool(it))
    assigned: set[str] = field(default_factory=set)  # cfg.r = ...: the code sets it itself
    keys: dict[str, str] | None = None  # cfg["tau"], cfg.get(...): a dict (see .keyed)

    @property
    def config(self) -> bool:
        return self.foreign and not self.tensor_attrs and not self.module

    @property
    def keyed(self) -> bool:
        return (self.keys is not None and not self.tensor_attrs and not self.module
                and set(self.attrs) <= {"get", "keys", "items", "values"})

    @property
    def sections(self) -> bool:
        return self.split_dim is not None and self.sequence


def argument_uses(owner: Any, names: list[str]) -> dict[str, Use]:
    """Each name's :class:`Use` in ``owner``'s forward (and setup_context and backward, through
    what forward stores on ctx).

    Example:
        >>> import torch
        >>> class Q(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x, cfg, sections):
        ...         parts = torch.split(x * cfg.scale, sections, dim=-1)
        ...         return torch.stack([p.sum(-1) for p in parts[:len(sections)]], -1)
        >>> uses = argument_uses(Q, ["x", "cfg", "sections"])
        >>> uses["cfg"].config, uses["cfg"].attrs, uses["sections"].sections
        (True, {'scale': 'float'}, True)
    """
    uses = {n: Use() for n in names}
    if not names:
        return uses
    forward = getattr(owner, "forward", owner)
    _annotations(forward, uses)
    stored: dict[str, str] = {}
    keys: dict[str, dict[str, str]] = {}
    for method in ("forward", "setup_context"):
        fn = forward if method == "forward" else vars(owner).get(method) \
            if isinstance(owner, type) else None
        tree = _parse(fn)
        if tree is not None:
            _Reader(uses, {n: n for n in names}).visit(tree)
            drop_optional(uses, hasattr_tested(tree, {n: n for n in names}), _foreign)
            read_keys(tree, keys, names)
            stored.update(_stored(tree, names))
            stored.update(stored_on_ctx(tree, names))  # ctx.cfg = inputs[1]
            if method == "forward":  # integrate(x, theta, params) reads params.nc
                _helpers(fn, tree, uses, owner)
    backward = _parse(getattr(owner, "backward", None)) if isinstance(owner, type) else None
    if backward is not None and stored:
        _Reader(uses, {}, stored).visit(backward)
        forward_keyed = set(keys)
        read_keys(backward, keys, [], stored)
        for name in set(keys) - forward_keyed:  # keys only backward reads: see keyed.NEUTRAL
            keys[name] = {k: NEUTRAL.get(how, how) for k, how in keys[name].items()}
    for name, read in keys.items():
        uses[name].keys = read
    for name in truth_tested(owner, names):
        uses[name].boolean = True
    for name, use in uses.items():
        word = name.lower().rstrip("_")
        if word in _MODULE_WORDS or word.endswith(("_module", "_layer", "_block", "_net")):
            use.module = True
    return uses


def _helpers(fn: Any, tree: ast.AST, uses: dict[str, Use], owner: Any) -> None:
    """Attributes of an argument that forward only hands on, read where it is used: in the
    functions of the project's package forward passes it to (a few levels deep). Only
    arguments forward itself does not use as tensors, and only their attributes."""
    from gradsmith.discovery.callees import followed

    handed = {n: n for n, u in uses.items() if not u.tensor_attrs and not u.module}
    if not handed:
        return
    klass = owner if isinstance(owner, type) else None
    for helper, passed in followed(fn, tree, handed, klass, package=True):
        found = {n: Use() for n in set(passed.values())}
        _Reader(found, passed).visit(helper)
        drop_optional(found, hasattr_tested(helper, passed), _foreign)  # x.t if hasattr(x,..)
        for name, use in found.items():
            if use.tensor_attrs or use.module:
                continue  # a tensor or a module there: nothing to add to a config
            for attr, how in use.attrs.items():
                uses[name].attrs.setdefault(attr, how)
            uses[name].assigned |= use.assigned
            uses[name].foreign = uses[name].foreign or use.foreign


def _annotations(fn: Any, uses: dict[str, Use]) -> None:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return
    for name, use in uses.items():
        p = params.get(name)
        if p is None or p.annotation is p.empty:
            continue
        text = str(p.annotation)
        if "Size" in text:
            use.size = True
        elif any(w in text for w in ("List[int]", "Tuple[int", "Sequence[int]", "list[int]",
                                     "tuple[int")):
            use.sequence = True
        if "Module" in text:
            use.module = True


def _stored(tree: ast.AST, names: list[str]) -> dict[str, str]:
    """ctx attribute -> parameter, for ``ctx.sections = sections``."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and \
                node.value.id in names:
            for target in node.targets:
                if isinstance(target, ast.Attribute):
                    found[target.attr] = node.value.id
    return found


class _Reader(ast.NodeVisitor):
    """Records uses of parameters (``names``: local name -> parameter; ``ctx_attrs``: ctx
    attribute -> parameter, in backward)."""

    def __init__(self, uses: dict[str, Use], names: dict[str, str],
                 ctx_attrs: dict[str, str] | None = None) -> None:
        self.uses, self.names, self.ctx_attrs = uses, names, ctx_attrs or {}
        self.int_contexts: list[ast.AST] = []

    def param(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return self.names.get(node.id)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                node.value.id == "ctx":
            return self.ctx_attrs.get(node.attr)
        return None

    def visit_Attribute(self, node: ast.Attribute) -> None:
        name = self.param(node.value)
        if name is not None:
            use = self.uses[name]
            if node.attr in _TENSOR_ATTRS:
                use.tensor_attrs = True
            elif node.attr in _MODULE_ATTRS:
                use.module = True
            elif _plain(node.attr):
                use.attrs.setdefault(node.attr, "float")
                use.foreign = use.foreign or _foreign(node.attr)
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:  # params.A, params.r = ...: set here, not an input
            for sub in (target.elts if isinstance(target, ast.Tuple) else [target]):
                if isinstance(sub, ast.Attribute) and (name := self.param(sub.value)):
                    self.uses[name].assigned.add(sub.attr)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute):
            owner = self.param(func.value)
            if owner is not None and _plain(func.attr):  # qparams.quantize(x)
                self.uses[owner].attrs[func.attr] = "call"
            if func.attr == "split" and _namespaced(func) and len(node.args) >= 2:
                self._split(node.args[1], node.args[2:], node.keywords)  # torch.split(x, s)
            elif func.attr == "split" and node.args:  # x.split(s, dim)
                self._split(node.args[0], node.args[1:], node.keywords)
            if len(node.args) == 1 and (func.attr in _SHAPE_METHODS and not _namespaced(func) or
                                        func.attr in _SHAPE_FUNCTIONS and _namespaced(func)):
                name = self.param(node.args[0])
                if name is not None:
                    self.uses[name].size = True
        elif isinstance(func, ast.Name):
            if func.id in _SEQUENCE_FUNCTIONS:
                for a in node.args:
                    self._sequence(a)
            if func.id in ("range", "int"):
                for a in node.args:
                    self._int(a)
        self.generic_visit(node)

    def visit_For(self, node: ast.For) -> None:
        self._sequence(node.iter)
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        self._sequence(node.value)
        self._int(node.slice)
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, (ast.LShift, ast.RShift, ast.Pow, ast.FloorDiv, ast.Mod)):
            self._int(node.right)
            if not isinstance(node.op, ast.Pow):
                self._int(node.left)
        self.generic_visit(node)

    def _split(self, sections: ast.AST, rest: list[ast.AST], keywords: list[ast.keyword]) -> None:
        name = self.param(sections)
        if name is None:
            return
        dim = rest[0] if rest else next((k.value for k in keywords if k.arg == "dim"), None)
        value = 0
        if isinstance(dim, ast.Constant) and isinstance(dim.value, int):
            value = dim.value
        elif isinstance(dim, ast.UnaryOp) and isinstance(dim.operand, ast.Constant):
            value = -dim.operand.value
        self.uses[name].split_dim = value

    def _sequence(self, node: ast.AST) -> None:
        name = self.param(node)
        if name is not None:
            self.uses[name].sequence = True

    def _int(self, node: ast.AST) -> None:
        """An attribute of a config object used where only an int works (``range``, shifts,
        ``2 ** cfg.bits``, subscripts) is an int."""
        for sub in ast.walk(node):
            if isinstance(sub, ast.Attribute):
                name = self.param(sub.value)
                if name is not None and _plain(sub.attr) and \
                        self.uses[name].attrs.get(sub.attr) != "call":
                    self.uses[name].attrs[sub.attr] = "int"


def _plain(attr: str) -> bool:
    """An attribute a config object may have: not a module's, not one of the tensor methods
    that mark a tensor (``x.shape``, ``x.sum``)."""
    return attr not in _MODULE_ATTRS and attr not in _TENSOR_ATTRS and not attr.startswith("__")


def _foreign(attr: str) -> bool:
    """An attribute tensors do not have (``x.amax`` is a tensor's, ``cfg.num_bits`` is not)."""
    import torch

    return _plain(attr) and not hasattr(torch.Tensor, attr)


def _namespaced(func: ast.Attribute) -> bool:
    return isinstance(func.value, ast.Name) and func.value.id in ("torch", "F", "functional")
