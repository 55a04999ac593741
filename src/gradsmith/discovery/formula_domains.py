"""Where a formula is defined, read from the formula itself (private).

Random normal inputs fall outside what many real Functions are written for, and a Function
evaluated outside its domain either raises (a skip) or returns ``nan`` / a clamped constant
(a false alarm). :mod:`~gradsmith.discovery.domains` reads the domain a forward *clamps* to;
this module reads the domain a formula *needs*, from forward (and from backward through what
forward saves), never by running the code:

- ``acosh(x)``, ``sqrt(x * x - 1)`` (an ``arcosh`` written out): ``x > 1``; ``atanh(x)``:
  ``-1 < x < 1``;
- ``1 - sum(u * u, dim=-1)`` (directly or through a local, ``clamp(..., 1 - eps)`` first): the
  rows of ``u`` are points inside the unit ball (hyperbolic distances divide by it);
- ``features[y]`` with ``y`` running over ``indexes`` (``for x, y in zip(inputs, indexes)``),
  or ``features[indexes]``: ``indexes`` holds integer row indices;
- ``torch.eye(d)`` with ``d = x.shape[1]`` (an identity of ``x``'s size: Newton-Schulz
  iterations, Pade approximants) or a matrix function (``logm``, ``sqrtm``, ``eigh``...) of
  ``x``: ``x`` is a (batch of) symmetric positive definite matrices, where those converge and
  are real; ``x.reshape(b, d * d)``: ``x`` is a (batch of) square matrices (more signs of
  square matrices: :mod:`~gradsmith.discovery.squares`).

Calls forward makes with a parameter (its own static helpers, another class's static methods,
functions of its module or of another module of its package, spd_learn's ``from .autograd
import modeig_forward``: :mod:`~gradsmith.discovery.callees`) are read as forward's own.
Each fact is a guess the probe confirms; the Inputs column says what was chosen and why.
"""

from __future__ import annotations

import ast
import math
from typing import Any

from gradsmith.discovery import log_complements
from gradsmith.discovery.callees import followed
from gradsmith.discovery.hints import _TENSOR_ATTRS, Hint
from gradsmith.discovery.log_complements import log_complement_of
from gradsmith.discovery.matrices import _saved_aliases
from gradsmith.discovery.source import call_name, parse, stored_on_ctx
from gradsmith.discovery.squares import read_squares, square_grams

_ACOSH = {"acosh", "arccosh"}
_ATANH = {"atanh", "arctanh"}
_MATRIX_FUNCTIONS = {"logm", "sqrtm", "expm", "funm", "eigh", "eigvalsh", "symeig",
                     "matrix_log", "matrix_sqrt", "fractional_matrix_power"}
_SIZED = {"zeros", "ones", "empty", "randn", "rand"}
# Conversions that hand on the same values (``x.detach().cpu().numpy().astype(np.float64)``
# is still x: a scipy ``sqrtm`` of it is a matrix function of x).
_PASS_THROUGH = {"detach", "cpu", "numpy", "clone", "contiguous", "double", "float", "to",
                 "type", "type_as", "astype"}
_WHY = {"acosh": "forward takes its arcosh: the domain it is written for",
        "atanh": "forward takes its artanh: the domain it is written for",
        "sqrt": "forward takes sqrt(x * x - c): the domain it is written for"}


def read_formula_domains(forward: Any, owner: type | None, hints: dict[str, Hint]) -> None:
    """Set ``domain``/``domain_why``, ``ball``, ``kind="index"``, ``matrix`` and ``rank_min``
    on ``hints`` for what forward's (and backward's) formulas need of each parameter; a domain
    forward clamps to (already set) and a matrix structure read elsewhere win.

    Example:
        >>> def forward(ctx, x, eps):
        ...     z = torch.sqrt(x * x - 1)
        ...     return torch.log(x + z)
        >>> hints = {"x": Hint(), "eps": Hint()}
        >>> read_formula_domains(forward, None, hints)
        >>> hints["x"].domain
        (1.0, inf)
    """
    trees = [(parse(forward), {n: n for n in hints})]
    stored = {f"ctx.{attr}": name for attr, name in stored_on_ctx(trees[0][0], list(hints)).items()}
    trees[0][1].update(stored)
    if owner is not None:
        for helper in ("setup_context", "backward"):
            tree = parse(vars(owner).get(helper) or None)
            if tree is not None and helper == "backward":
                aliases = _aliases(trees[0][0], trees[0][1]) if trees[0][0] else None
                trees.append((tree, {**stored, **_saved_aliases(trees[0][0], tree, hints,
                                                                aliases)}))
    grams: dict[str, int] = {}
    for tree, names in trees:
        if tree is None:
            continue
        names = _aliases(tree, names)
        (reader := _Reader(hints, names)).visit(tree)
        grams.update(read_squares(tree, reader))  # t.reshape(b, n, n), matrix_exp(x) ...
        for helper, passed in followed(forward, tree, names, owner, _param, _aliases,
                                       package=True):  # from .autograd import modeig_forward
            _Reader(hints, passed).visit(helper)  # Owner._logm(x), Shared.forward(ctx, x)
    square_grams(grams, hints)  # x @ m @ x.mT beside another square matrix


def in_ball(shape: tuple[int, ...], generator: Any) -> Any:
    """float64 rows (along the last dimension) of norm 0.1 to 0.7: inside the unit ball."""
    import torch

    value = torch.randn(shape, dtype=torch.float64, generator=generator)
    if not shape:
        return value.clamp(-0.7, 0.7)
    radius = 0.1 + 0.6 * torch.rand((*shape[:-1], 1), dtype=torch.float64, generator=generator)
    return value / value.norm(dim=-1, keepdim=True).clamp_min(1e-12) * radius


def _aliases(tree: ast.AST, names: dict[str, str]) -> dict[str, str]:
    """``names`` plus locals assigned a parameter as it is (``x = input``, ``x = M.detach()``)."""
    names = dict(names)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            for target, value in _pairs(node.targets[0], node.value):  # a, b = x, y too
                if (param := _param(value, names)) is not None:
                    names.setdefault(target.id, param)
    return names


def _param(node: ast.AST, names: dict[str, str],
           through: set[str] = _PASS_THROUGH) -> str | None:
    """The parameter ``node`` stands for, through ``.data`` and the methods ``through``
    (``.detach()``, ``.numpy()``...)."""
    while True:
        if isinstance(node, ast.Name):
            return names.get(node.id)
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id == "ctx" and f"ctx.{node.attr}" in names):
            return names[f"ctx.{node.attr}"]  # ctx.features = features in forward
        if isinstance(node, ast.Attribute) and node.attr == "data":
            node = node.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in through):
            node = node.func.value
        else:
            return None


def _pairs(target: ast.AST, value: ast.AST):
    """(name, value) of an assignment, element-wise for ``b, d = x.shape[0], x.shape[1]``."""
    if isinstance(target, ast.Name):
        yield target, value
    elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(
            target.elts) == len(value.elts):
        for t, v in zip(target.elts, value.elts):
            if isinstance(t, ast.Name):
                yield t, v


def _number(node: ast.AST) -> float | None:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return float(node.value)
    return None


def _shape_of(node: ast.AST) -> bool:
    """``x.shape``, ``x.size()``, ``list(x.size())``, ``tuple(x.shape)``: a tensor's sizes."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
            node.func.id in ("list", "tuple") and len(node.args) == 1:
        node = node.args[0]
    if isinstance(node, ast.Call) and not node.args and isinstance(node.func, ast.Attribute) \
            and node.func.attr == "size":
        return True
    return isinstance(node, ast.Attribute) and node.attr == "shape"


class _Reader(ast.NodeVisitor):
    def __init__(self, hints: dict[str, Hint], names: dict[str, str]):
        self.hints, self.names = hints, names
        self.sizes: dict[str, tuple[str, int]] = {}   # d = x.shape[1] -> (x, 1)
        self.sqnorms: dict[str, str] = {}             # squnorm = clamp(sum(u * u, -1)) -> u
        self.elements: dict[str, str] = {}            # for y in indexes -> y: indexes
        self.shapes: set[str] = set()                 # size = list(x.size()): ints, not rows

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        for stmt in ast.walk(node):  # locals first: uses may come before in walk order
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                if isinstance(stmt.targets[0], ast.Name) and _shape_of(stmt.value):
                    self.shapes.add(stmt.targets[0].id)
                for target, value in _pairs(stmt.targets[0], stmt.value):
                    if (size := self._size(value)) is not None:
                        self.sizes[target.id] = size
                    if (ball := self._sqnorm_in(value)) is not None:
                        self.sqnorms[target.id] = ball
            elif isinstance(stmt, ast.For):
                self._loop(stmt)
        self.generic_visit(node)

    def _loop(self, node: ast.For) -> None:
        if isinstance(node.iter, ast.Call) and call_name(node.iter) == "zip" and isinstance(
                node.target, ast.Tuple):
            pairs = zip(node.target.elts, node.iter.args)
        else:
            pairs = [(node.target, node.iter)]
        for target, source in pairs:
            if isinstance(target, ast.Name) and (param := _param(source, self.names)):
                self.elements[target.id] = param

    def _size(self, node: ast.AST) -> tuple[str, int] | None:
        """``x.shape[k]``, ``x.size(k)``, ``x.data.shape[k]``: (x, k)."""
        if isinstance(node, ast.Name):
            return self.sizes.get(node.id)
        if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute)
                and node.value.attr == "shape" and isinstance(node.slice, ast.Constant)
                and type(node.slice.value) is int):
            param = _param(node.value.value, self.names)
            return (param, node.slice.value) if param else None
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "size" and len(node.args) == 1
                and isinstance(node.args[0], ast.Constant) and type(node.args[0].value) is int):
            param = _param(node.func.value, self.names)
            return (param, node.args[0].value) if param else None
        return None

    def _sqnorm_in(self, node: ast.AST) -> str | None:
        """The parameter whose squared norm ``node`` holds (``sum(u * u, dim=-1)``,
        ``(u ** 2).sum(-1)``, ``u.pow(2).sum(-1)``, a clamp of one, a local holding one)."""
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and sub.id in self.sqnorms:
                return self.sqnorms[sub.id]
            if isinstance(sub, ast.Call) and call_name(sub) == "sum":
                method = isinstance(sub.func, ast.Attribute) and not (
                    isinstance(sub.func.value, ast.Name) and sub.func.value.id not in self.names
                    and sub.func.value.id not in self.sizes)  # torch.sum(u * u) vs (u * u).sum()
                operand = sub.func.value if method else (sub.args[0] if sub.args else None)
                if (param := self._squared(operand)) is not None:
                    return param
        return None

    def _squared(self, node: ast.AST | None) -> str | None:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            left, right = _param(node.left, self.names), _param(node.right, self.names)
            return left if left is not None and left == right else None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) and _number(
                node.right) == 2:
            return _param(node.left, self.names)
        if isinstance(node, ast.Call) and call_name(node) == "pow":
            args = node.args
            if isinstance(node.func, ast.Attribute) and _param(node.func.value, self.names):
                return _param(node.func.value, self.names) if args and _number(
                    args[0]) == 2 else None
            if len(args) == 2 and _number(args[1]) == 2:
                return _param(args[0], self.names)
        return None

    def _domain(self, name: str | None, bounds: tuple[float, float], why: str) -> None:
        if name is None:
            return
        hint = self.hints[name]
        if hint.domain is None and hint.kind in (None, "tensor") and hint.matrix is None:
            hint.domain, hint.domain_why = bounds, why

    def _square(self, name: str | None, axis: int, kind: str) -> None:
        if name is None or self.hints[name].kind not in (None, "tensor"):
            return
        hint = self.hints[name]
        if axis >= 0:
            hint.rank_min = max(hint.rank_min, axis + 2)
        if hint.matrix in (None, "square"):
            hint.matrix = kind

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.Sub) and _number(node.left) == 1:  # 1 - |u|^2
            if (param := self._sqnorm_in(node.right)) is not None:
                hint = self.hints[param]
                if hint.kind in (None, "tensor") and hint.domain is None:
                    hint.ball = True
        if isinstance(node.op, ast.Mult):  # x.reshape(b, d * d): square in d
            left, right = self._size(node.left), self._size(node.right)
            if left is not None and left == right:
                self._square(left[0], left[1], "square")
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        owner = _param(node.value, self.names)
        if (isinstance(node.value, ast.Name) and node.value.id in self.shapes) or _shape_of(
                node.value):  # size[dim], x.shape[dim]: a dimension, an int
            for item in items:
                if (dim := _param(item, self.names)) is not None and \
                        self.hints[dim].kind is None:
                    self.hints[dim].kind = "int"
            self.generic_visit(node)
            return
        for item in items:
            if isinstance(item, ast.BinOp):
                self._count(item)
            index = self.elements.get(item.id) if isinstance(item, ast.Name) else None
            index = index or _param(item, self.names)
            if index is not None and index != owner and self.hints[index].kind in (
                    None, "tensor", "seq", "index"):
                self.hints[index].kind = "index"  # features[y], y in indexes: row indices
                if len(items) == 1 and owner is not None:
                    self.hints[index].rows_of = owner  # values below its number of rows
                    if self.hints[owner].kind is None:
                        self.hints[owner].kind = "tensor"  # ctx.features[y]: a tensor
        self.generic_visit(node)

    def _count(self, node: ast.AST) -> None:
        """``range(1, n - 1)``, ``torch.zeros(b, n, d)``, ``Y[:, n - 2]``: ``n`` is an int."""
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)) and (
                _number(node.right) is not None or _number(node.left) is not None):
            node = node.left if _number(node.right) is not None else node.right
        name = node.id if isinstance(node, ast.Name) else None
        if name in self.names and self.hints[self.names[name]].kind is None:
            self.hints[self.names[name]].kind = "int"

    def visit_Attribute(self, node: ast.Attribute) -> None:
        """``ctx.features.t()`` where forward stored ``features`` on ctx: a tensor."""
        name = _param(node.value, self.names)
        if name is not None and node.attr in _TENSOR_ATTRS and self.hints[name].kind is None \
                and not isinstance(node.value, ast.Name):
            self.hints[name].kind = "tensor"
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        callee = call_name(node)
        first = node.args[0] if node.args else None
        # torch.zeros(b, n, d): each an int; torch.randn(shape) alone may be a whole size
        if (callee in _SIZED and len(node.args) >= 2) or (
                callee == "range" and isinstance(node.func, ast.Name)):
            for arg in node.args:
                self._count(arg)
        if callee in _ACOSH and first is not None:
            self._domain(_param(first, self.names), (1.0, math.inf), _WHY["acosh"])
        elif callee in _ATANH and first is not None:
            self._domain(_param(first, self.names), (-1.0, 1.0), _WHY["atanh"])
        elif callee == "sqrt" and first is not None:
            self._sqrt_of_square(first)
        elif (lp := log_complement_of(node, lambda n: _param(n, self.names))) is not None:
            self._domain(lp, log_complements.BOUNDS, log_complements.WHY)  # log(-expm1(x))
        elif callee == "eye" and first is not None and (size := self._size(first)):
            self._square(size[0], size[1], "spd")
        elif callee in _MATRIX_FUNCTIONS and first is not None:
            self._square(_param(first, self.names), -1, "spd")
        self.generic_visit(node)

    def _sqrt_of_square(self, node: ast.AST) -> None:
        """``sqrt(x * x - c)`` (or ``x ** 2 - c``): real only where ``|x| > sqrt(c)``."""
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub)):
            return
        c = _number(node.right)
        if c is not None and c > 0 and (param := self._squared(node.left)) is not None:
            self._domain(param, (math.sqrt(c), math.inf), _WHY["sqrt"])
