"""A small forward data-flow pass over one method: where does each local name come from?

Each value carries *origins* (``input:<name>``, ``grad``, ``saved``, ``output``): a view or
``self``-returning conversion keeps its source's origins, anything computed out of place is
fresh (no origin). Branches are joined by union, so "may alias on some path" counts.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field

from gradsmith.linter import _tensors as T


@dataclass(frozen=True)
class Val:
    """Abstract value: origins, whether it is a tensor (None = unknown), tuple elements, and
    whether it is ``None`` on every path (``save_for_backward`` takes a None)."""

    origins: frozenset[str] = frozenset()
    tensor: bool | None = None
    elements: tuple[Val, ...] | None = None
    single: bool = False
    none: bool = False

    def fresh(self) -> Val:
        return Val(tensor=self.tensor, single=self.single or bool(self.tensor))

    @property
    def count(self) -> int | None:
        """How many values a ``return`` of this value gives backward/apply (None: unknown)."""
        if self.elements is not None:
            return len(self.elements)
        return 1 if (self.single or self.tensor) else None


_MAX_DEPTH = 150
#: Tensor methods returning a tuple of views of the tensor (its items share its memory).
_SPLITS = frozenset({"split", "chunk", "unbind", "tensor_split", "hsplit", "vsplit", "dsplit"})
#: Modules whose functions share names with tensor methods (``math.sqrt``, ``np.exp``).
_NUMERIC_MODULES = frozenset({"math", "np", "numpy", "random", "operator", "cmath"})
UNKNOWN = Val()
TENSOR = Val(tensor=True, single=True)
NOT_TENSOR = Val(tensor=False)
SCALAR = Val(tensor=False, single=True)
NONE = Val(tensor=False, single=True, none=True)


def join(a: Val, b: Val) -> Val:
    """Union of two values reaching the same point."""
    tensor = a.tensor if a.tensor == b.tensor else None
    elements = None
    if a.elements is not None and b.elements is not None and len(a.elements) == len(b.elements):
        elements = tuple(join(x, y) for x, y in zip(a.elements, b.elements))
    single = (a.single or bool(a.tensor)) and (b.single or bool(b.tensor))
    return Val(a.origins | b.origins, tensor, elements, single, a.none and b.none)


def _basic_index(node: ast.expr) -> bool:
    """Index made only of constants and slices (a view, not an advanced-indexing copy); a
    slice is a view whatever its bounds (``g[:, :rotary_dim]``)."""
    if isinstance(node, ast.Tuple):
        return all(_basic_index(e) for e in node.elts)
    if isinstance(node, ast.UnaryOp):
        return _basic_index(node.operand)
    if isinstance(node, ast.Slice):
        return True
    return isinstance(node, ast.Constant) and (
        node.value is None or node.value is Ellipsis or isinstance(node.value, int)
    )


@dataclass
class Flow:
    """Evaluates expressions against an environment of local names.

    Args:
        ctx: Name of the ctx parameter (or None).
        torchish: Qualified name of a dotted call target when it refers to torch
            (``F.relu`` -> ``"torch.nn.functional.relu"``), else None.
    """

    ctx: str | None
    torchish: Callable[[list[str]], str | None]
    env: dict[str, Val] = field(default_factory=dict)
    #: What ``ctx.saved_tensors`` unpacks to, position by position, when forward saves once.
    saved: tuple[Val, ...] | None = None
    #: By how many names unpack them: what ``ctx.saved_tensors`` holds when forward saves
    #: different numbers on different branches (backward unpacks per branch too).
    layouts: dict[int, tuple[Val, ...]] | None = None

    depth: int = 0

    # -- expressions -----------------------------------------------------------------------
    def eval(self, node: ast.expr | None) -> Val:
        if node is None or self.depth > _MAX_DEPTH:  # absurdly deep expressions: give up
            return UNKNOWN
        method = getattr(self, "_eval_" + type(node).__name__, None)
        if method is None:
            return UNKNOWN
        self.depth += 1
        try:
            return method(node)
        finally:
            self.depth -= 1

    def _eval_Name(self, node: ast.Name) -> Val:
        return self.env.get(node.id, UNKNOWN)

    def _eval_Constant(self, node: ast.Constant) -> Val:
        return NONE if node.value is None else SCALAR

    def _eval_JoinedStr(self, node: ast.JoinedStr) -> Val:
        return SCALAR

    def _eval_Tuple(self, node: ast.Tuple) -> Val:
        if any(isinstance(e, ast.Starred) for e in node.elts):
            return NOT_TENSOR
        return Val(tensor=False, elements=tuple(self.eval(e) for e in node.elts))

    def _eval_List(self, node: ast.List) -> Val:
        # Lists are not unpacked by autograd (a returned list is one object), so no count;
        # iteration still sees the elements.
        vals = [self.eval(e) for e in node.elts if not isinstance(e, ast.Starred)]
        origins = frozenset().union(*(v.origins for v in vals)) if vals else frozenset()
        return Val(origins, False)

    def _eval_Dict(self, node: ast.Dict) -> Val:
        return NOT_TENSOR

    def _eval_Attribute(self, node: ast.Attribute) -> Val:
        if isinstance(node.value, ast.Name) and node.value.id == self.ctx:
            if node.attr in ("saved_tensors", "saved_variables"):
                return Val(frozenset({"saved"}), tensor=False, elements=self.saved)
            return UNKNOWN
        base = self.eval(node.value)
        if node.attr in T.VIEW_ATTRS:
            return Val(base.origins, True, single=True)
        if node.attr in T.NON_TENSOR_ATTRS:
            return NOT_TENSOR if node.attr == "shape" else SCALAR
        return UNKNOWN

    def _eval_Subscript(self, node: ast.Subscript) -> Val:
        base = self.eval(node.value)
        if base.elements is not None and isinstance(node.slice, ast.Constant):
            idx = node.slice.value
            if isinstance(idx, int) and -len(base.elements) <= idx < len(base.elements):
                return base.elements[idx]
        if "saved" in base.origins and base.tensor is False:
            return Val(frozenset({"saved"}), True, single=True)
        if base.tensor is False:
            return Val(base.origins, None) if base.origins else UNKNOWN
        if base.tensor and _basic_index(node.slice):
            return Val(base.origins, True, single=True)
        return TENSOR if base.tensor else UNKNOWN

    def _eval_BinOp(self, node: ast.BinOp) -> Val:
        left, right = self.eval(node.left), self.eval(node.right)
        if isinstance(node.op, ast.MatMult) or left.tensor or right.tensor:
            return TENSOR
        if left.single and right.single:
            return SCALAR
        if isinstance(node.op, ast.Add) and left.elements is not None and right.elements is not None:
            return Val(tensor=False, elements=left.elements + right.elements)
        if isinstance(node.op, ast.Mult) and isinstance(node.left, ast.Tuple) and left.elements \
                is not None and isinstance(node.right, ast.Constant) and type(node.right.value) is int:
            return Val(tensor=False, elements=left.elements * max(node.right.value, 0))
        if left.tensor is False and right.tensor is False:
            return NOT_TENSOR
        return UNKNOWN

    def _eval_UnaryOp(self, node: ast.UnaryOp) -> Val:
        if isinstance(node.op, ast.Not):
            return SCALAR
        return self.eval(node.operand).fresh()

    def _eval_Compare(self, node: ast.Compare) -> Val:
        vals = [self.eval(node.left), *map(self.eval, node.comparators)]
        if any(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in node.ops):
            return SCALAR
        return TENSOR if any(v.tensor for v in vals) else UNKNOWN

    def _eval_IfExp(self, node: ast.IfExp) -> Val:
        return join(self.eval(node.body), self.eval(node.orelse))

    def _eval_NamedExpr(self, node: ast.NamedExpr) -> Val:
        val = self.eval(node.value)
        self.env[node.target.id] = val
        return val

    def _eval_Call(self, node: ast.Call) -> Val:
        func = node.func
        parts = _dotted(func)
        qual = self.torchish(parts) if parts and parts[0] not in self.env else None
        if qual:
            return self._torch_call(qual, node)
        if isinstance(func, ast.Attribute):
            if parts and parts[0] in _NUMERIC_MODULES and parts[0] not in self.env:
                return SCALAR if parts[0] == "math" else UNKNOWN  # math.sqrt, np.prod
            recv = self.eval(func.value)
            name = func.attr
            if name in _SPLITS and recv.tensor is not False and recv.origins:
                return Val(recv.origins, False)  # `a, b = g.chunk(2)`: views of g
            if name in T.TUPLE_RESULT:
                return UNKNOWN
            if name in T.NON_TENSOR_METHODS:
                return SCALAR if name != "tolist" else UNKNOWN
            if any(k.arg == "copy" and isinstance(k.value, ast.Constant) and k.value.value
                   for k in node.keywords):
                return TENSOR  # x.to(dtype, copy=True) always copies
            if name in T.VIEW_METHODS or T.is_inplace_name(name):
                return Val(recv.origins, True if recv.tensor is not False else None, single=True)
            if recv.tensor or name in T.TENSOR_EVIDENCE:
                return TENSOR
            return UNKNOWN
        if isinstance(func, ast.Name):
            if func.id == "tuple" and len(node.args) == 1 and not node.keywords \
                    and func.id not in self.env:
                items = self._sequence(node.args[0])
                if items is not None:
                    return Val(tensor=False, elements=items)
            if func.id in ("len", "int", "float", "bool", "str", "repr", "isinstance", "abs"):
                return SCALAR
            if func.id in ("range", "list", "tuple", "dict", "set", "sorted", "enumerate", "zip"):
                return NOT_TENSOR
        return UNKNOWN

    def _sequence(self, node: ast.expr, depth: int = 0) -> tuple[Val, ...] | None:
        """Items of a list/tuple display built with ``+`` and ``* n`` (``[None] * 6 + [g]``)."""
        if depth > 20:
            return None
        if isinstance(node, (ast.List, ast.Tuple)):
            if any(isinstance(e, ast.Starred) for e in node.elts):
                return None
            return tuple(self.eval(e) for e in node.elts)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self._sequence(node.left, depth + 1), self._sequence(node.right, depth + 1)
            return None if left is None or right is None else left + right
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            seq, times = node.left, node.right
            if isinstance(seq, ast.Constant):
                seq, times = times, seq
            items = self._sequence(seq, depth + 1)
            if items is not None and isinstance(times, ast.Constant) and type(times.value) is int:
                return items * max(times.value, 0)
        return None

    def _torch_call(self, qual: str, node: ast.Call) -> Val:
        module, _, name = qual.rpartition(".")
        if module not in T.TENSOR_MODULES or name in T.TUPLE_RESULT:
            return UNKNOWN
        if name == "where" and len(node.args) < 3:
            return UNKNOWN
        if any(kw.arg and kw.arg.startswith("return_") for kw in node.keywords):
            return UNKNOWN
        if name in T.TORCH_NON_TENSOR or name[:1].isupper() and name not in T.LEGACY_CTORS:
            return SCALAR
        if (name in T.TORCH_VIEW_FUNCS or T.is_inplace_name(name)) and node.args:
            return Val(self.eval(node.args[0]).origins, True, single=True)
        return TENSOR

    # -- statements ------------------------------------------------------------------------
    def bind(self, target: ast.expr, val: Val) -> None:
        """Assign ``val`` to an assignment target (names, tuples, starred)."""
        if isinstance(target, ast.Name):
            self.env[target.id] = val
        elif isinstance(target, (ast.Tuple, ast.List)):
            elts = target.elts
            starred = any(isinstance(e, ast.Starred) for e in elts)
            for i, elt in enumerate(elts):
                if isinstance(elt, ast.Starred):
                    self.bind(elt.value, Val(val.origins, False))
                elif val.elements is not None and not starred and len(val.elements) == len(elts):
                    self.bind(elt, val.elements[i])
                elif val.elements is None and not starred and self.layouts and "saved" in \
                        val.origins and len(elts) in self.layouts:
                    self.bind(elt, self.layouts[len(elts)][i])
                elif val.origins:  # items of saved_tensors or of *grads are tensors
                    sure = "saved" in val.origins or "grad" in val.origins
                    self.bind(elt, Val(val.origins, True if sure else None))
                else:
                    self.bind(elt, UNKNOWN)


def _dotted(node: ast.expr) -> list[str] | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return None


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def walk_shallow(node: ast.AST) -> list[ast.AST]:
    """``ast.walk`` that does not enter nested functions, lambdas or classes.

    The list is computed once per node and cached on it (rules walk the same methods many
    times; this keeps lint time linear with a small constant).
    """
    cached = node.__dict__.get("_gs_shallow")
    if cached is not None:
        return cached
    out: list[ast.AST] = []
    stack = [node]
    while stack:
        cur = stack.pop()
        out.append(cur)
        for name in cur._fields:
            value = getattr(cur, name, None)
            if isinstance(value, list):
                for item in reversed(value):
                    if isinstance(item, ast.AST) and not isinstance(item, _SCOPES):
                        stack.append(item)
            elif isinstance(value, ast.AST) and not isinstance(value, _SCOPES):
                stack.append(value)
    node._gs_shallow = out
    return out
