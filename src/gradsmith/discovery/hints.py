"""Read what a forward's body and signature tell about its parameters (private).

Synthesis probes a forward with invented inputs; this module makes the first guesses good ones
by reading the code (never running it): ``x.shape[2]`` needs a tensor of rank 3 or more,
``x.view(-1, 8)`` a last dimension of 8, ``target`` in ``X.gather(1, target)`` an index tensor,
``mode == "symmetric"`` a string, ``Fm(x)`` a module, ``alpha.item()`` a tensor even though
``alpha`` is usually a float, and ``bias: Optional[Tensor] = None`` a tensor that may be absent.
Every hint is a guess that the probe confirms or discards: a wrong one costs a failed probe.
"""

from __future__ import annotations

import ast
import inspect
import typing
from dataclasses import dataclass, field
from typing import Any

from gradsmith.discovery.backward_items import read_backward_items
from gradsmith.discovery.backward_shapes import read_backward_ranks
from gradsmith.discovery.collectives import read_group_args
from gradsmith.discovery.ctx_literals import read_ctx_literals
from gradsmith.discovery.einsum_ranks import read_einsum_ranks
from gradsmith.discovery.guards import read_guards
from gradsmith.discovery.matrices import read_matrices
from gradsmith.discovery.permutations import read_permutations
from gradsmith.discovery.projections import read_projections
from gradsmith.discovery.reduced_params import read_reduced
from gradsmith.discovery.scaled_sizes import read_scaled_sizes
from gradsmith.discovery.size_arithmetic import read_size_arithmetic
from gradsmith.discovery.source import module_function
from gradsmith.discovery.source import parse as _parse
from gradsmith.discovery.stated import documented_options
from gradsmith.discovery.windows import read_windows

# Methods and attributes that only tensors have (a parameter using one is a tensor).
_TENSOR_ATTRS = {
    "shape", "size", "dim", "ndim", "ndimension", "view", "view_as", "reshape", "item", "type_as",
    "unsqueeze", "squeeze", "numel", "dtype", "device", "t", "T", "mT", "contiguous", "expand",
    "expand_as", "clone", "detach", "new_zeros", "new_ones", "new_empty", "new_tensor",
    "new_full", "sum", "mean", "abs", "sign", "exp", "log", "sigmoid", "tanh", "clamp",
    "clamp_", "clamp_min", "clamp_max", "softmax", "log_softmax", "transpose", "permute",
    "flatten", "masked_fill", "masked_fill_", "mul", "mul_", "div", "div_", "add", "add_",
    "sub", "sub_", "pow", "sqrt", "round", "floor", "ceil", "norm", "max", "min", "argmax",
    "gather", "scatter", "index_select", "split", "chunk", "matmul", "mm", "bmm", "float",
    "double", "half", "to", "requires_grad", "is_floating_point", "data", "zero_", "copy_",
    "fill_", "narrow", "unbind", "cumsum", "topk", "sort", "relu", "lt", "gt", "le", "ge", "eq",
    "ne", "where", "is_contiguous", "stride", "storage_offset", "is_cuda", "cpu", "cuda",
}
# Where the index tensor sits: as a method (x.gather(dim, index)) and as a function of the
# torch namespace (torch.gather(x, dim, index), F.one_hot(index)).
_INDEX_METHODS = {name: 1 for name in (
    "gather", "scatter", "scatter_", "scatter_add", "scatter_add_", "index_select",
    "take_along_dim", "index_add", "index_add_", "index_copy", "index_copy_", "index_fill",
    "index_fill_", "scatter_reduce", "scatter_reduce_")}
_INDEX_FUNCTIONS = {**{name: 2 for name in _INDEX_METHODS}, "one_hot": 0, "cross_entropy": 1,
                    "nll_loss": 1, "embedding": 0, "take_along_dim": 1}
_NAMESPACES = {"torch", "F", "functional", "nn"}
_MATMUL_FUNCS = {"matmul", "mm", "bmm", "linear", "einsum_never"}


@dataclass
class Hint:
    """What the code says about one parameter (``None`` fields: nothing said)."""

    kind: str | None = None        # tensor | index | int | float | bool | str | module | seq
    rank_min: int = 0
    last_dim: int | None = None
    literals: list[Any] = field(default_factory=list)
    optional: bool = False         # compared with None / passed to exists()
    matmul_left_of: str | None = None
    probability: bool = False      # torch.bernoulli(p): values in [0, 1]
    simplex: bool = False          # multinomial(p), choice(n, p=p): a probability vector (.simplexes)
    aspect: bool = False           # svd(A), qr(A), pinv(A): any aspect of matrix (.matrices)
    unit_dims: set[int] = field(default_factory=set)  # a raising guard needs size 1 there
    matrix: str | None = None      # tril | triu | spd | negdef | symmetric (linear algebra)
    domain: tuple[float, float] | None = None  # forward clamps it there (see .domains)
    domain_why: str = ""           # why, when a formula needs it (see .formula_domains)
    ball: bool = False             # rows inside the unit ball: 1 - |u|^2 (.formula_domains)
    rows_of: str | None = None     # an index into this parameter's rows (.formula_domains)
    fft_axis: int | None = None    # an FFT's length n along this axis of the signal (.lengths)
    count: bool = False            # range(n): a number of things, so at least 1
    split_by: str | None = None    # args[:n], args[n:]: *args split at the int parameter n
    split_rest: bool = False       # args[n:] is read: what follows the first n (parameters)
    row_size: bool = False         # t.view(-1, n): n is the size of a row of t
    above: float | None = None     # backward divides by (ctx.p - c): p lies above c
    pair: int = 0                  # a, b = ensure_list(flag, 2): a tuple of that many flags
    window: int = 0                # F.avg_pool2d(x, k): k is a pooling window of 2 dims
    leading: int = 0               # s[:, None, None, None]: one value per row of a 4-D tensor
    projects: str | None = None    # backward: self.mm(that): (rows, k) @ (k, features) (.projections)
    permutes: int | None = None    # x[..., idx] forward and backward: a permutation of that dim
    length: bool = False           # t < lengths: per-sequence lengths, 1..T (.integer_kinds)
    repeats: bool = False          # repeat_interleave(x, p): repeat counts of x's rows
    offsets: bool = False          # x[p[i]:p[i + 1]]: packed sequences' start offsets in x
    codes: list[int] = field(default_factory=list)  # a kernel loads it, tests == 0, == 5: codes
    total_of: str | None = None    # output_size=s: the sum of that parameter's counts
    size_term: bool = False        # (h + 2 * pad - k) // stride: an int of a size (.size_arithmetic)
    scaled: tuple | None = None    # 2 * cos.shape[-1] <= x.shape[-1]: (x, dx, dim, ratio) (.scaled_sizes)
    same_as: str | None = None     # sin.shape == (s, d // 2) of cos's sizes: shaped like cos
    sized_dims: dict[int, int] = field(default_factory=dict)  # three = t.shape[2]; three == 3
    item: bool = False             # (2 ** k - 1).item() in backward: one value (.backward_items)


def forward_hints(fn: Any, names: list[str], owner: type | None = None,
                  depth: int = 0) -> dict[str, Hint]:
    """Hints for each parameter in ``names`` from the annotations and body of ``fn``.

    Args:
        fn: the forward (a function) whose source to read.
        names: parameter names to collect hints for.

    Returns:
        name -> :class:`Hint` (every name present; empty hints where nothing was found).

    Example:
        >>> def forward(ctx, x, w, mode):
        ...     if mode == "fast":
        ...         return x.view(-1, 4) @ w
        ...     return x.shape[2] * w
        >>> h = forward_hints(forward, ["x", "w", "mode"])
        >>> (h["x"].kind, h["x"].rank_min, h["x"].last_dim, h["mode"].literals)
        ('tensor', 3, 4, ['fast'])
    """
    hints = {n: Hint() for n in names}
    _annotations(fn, hints)
    for name, values in documented_options(fn, names).items():  # "Options are 'a', 'b'"
        if hints[name].kind in (None, "str") and not hints[name].literals:
            hints[name].kind, hints[name].literals = "str", values[:4]
    read_guards(fn, hints)  # float selectors, size-1 dimensions (a tensor use still wins)
    tree = _parse(fn)
    if tree is not None:
        visitor = _Visitor(hints)
        visitor.visit(tree)
        visitor.merge_items()
        read_windows(tree, hints)  # F.avg_pool2d(x, kernel): kernel is a tuple of ints
        read_einsum_ranks(tree, hints)  # einsum('bki,bki->bk', x, w): x has rank 3
        read_size_arithmetic(fn, hints)  # (h + 2 * pad - k) // stride: pad, stride are ints
        read_group_args(fn, hints)  # dist.all_reduce(x, op=op, group=group): not tensors
        if depth == 0:
            read_scaled_sizes(tree, hints)  # rotary_dim = 2 * cos.shape[-1] <= headdim
        if owner is not None and depth < 3:
            for call in visitor.super_calls:
                _from_parent(call, owner, hints, depth)
        if depth < 2:
            for call in visitor.helper_calls:
                _from_helper(call, fn, hints, depth, visitor.tuples)
    if owner is not None and depth == 0:
        from gradsmith.discovery.passed_types import read_passed_types  # it reads Hint

        read_matrices(owner, hints)  # solves, Cholesky factors, symmetric matrices
        read_backward_ranks(owner, hints)  # bsz, d, n = grad.size(): an output of rank 3
        read_backward_items(owner, hints)  # (2 ** k - 1).item(): k holds one value
        read_reduced(owner, hints)  # g.sum((0, 2, 3)).reshape(s.shape): s is (1, C, 1, 1)
        read_permutations(owner, hints)  # x[..., idx] there and back: idx permutes a dim
        read_passed_types(owner, fn, hints)  # ctx.leak handed to `def f(..., leak: float)`
        read_ctx_literals(owner, hints)  # ctx.in1 = mode; backward: `if ctx.in1 == 'DFA'`
        read_projections(owner, hints)  # backward: e.mm(fb.view(-1, n)): a projected error
    return hints


def _from_helper(call: ast.Call, fn: Any, hints: dict[str, Hint], depth: int,
                 tuples: dict[str, list[ast.expr]]) -> None:
    """``mode = int_to_mode(mode)``: a module-level helper's body says what a parameter is
    (only the kind, the values it is compared with and whether it counts are taken; a wrong
    guess costs a probe). ``helper(x, *opt)`` passes the items of ``opt = (a, b)``."""
    found = module_function(call, fn)
    if found is None:
        return
    helper, params = found
    args: list[ast.expr] = []
    for a in call.args:
        if isinstance(a, ast.Starred):
            if not (isinstance(a.value, ast.Name) and a.value.id in tuples):
                break  # positions after an unknown unpacking are unknown
            args += tuples[a.value.id]
        else:
            args.append(a)
    passed = {params[i]: _passed_param(a, hints)
              for i, a in enumerate(args[:len(params)])}
    passed.update({kw.arg: _param_of(kw.value, hints) for kw in call.keywords
                   if kw.arg in params and kw.arg not in passed})
    passed = {theirs: ours for theirs, ours in passed.items() if ours}
    if not passed:
        return
    inner = forward_hints(helper, list(passed), depth=depth + 1)
    for theirs, ours in passed.items():
        got, mine = inner[theirs], hints[ours]
        if mine.kind is None and got.kind in ("int", "str") and got.literals:
            mine.kind = got.kind
            mine.literals += got.literals
        elif got.count and mine.kind in (None, "int") and not mine.literals:
            mine.kind, mine.count = "int", True  # range(dim) in the helper: how many dims
        elif got.kind == "bool" and mine.kind is None:
            mine.kind = "bool"  # heaviside(x, spike_out: bool = False): a flag, not 0.1
        mine.pair = mine.pair or got.pair


def _from_parent(call: ast.Call, owner: type, hints: dict[str, Hint], depth: int) -> None:
    """``super().forward(ctx, X, target, ...)``: the parent's body tells about our arguments."""
    parent = next((klass for klass in owner.__mro__[1:] if "forward" in vars(klass)), None)
    if parent is None:
        return
    forward = parent.forward
    try:
        params = [p.name for p in inspect.signature(forward).parameters.values()]
    except (TypeError, ValueError):
        return
    if params and params[0] in ("cls", "self"):
        params = params[1:]
    passed: dict[str, str] = {}
    for i, arg in enumerate(call.args):
        name = arg.id if isinstance(arg, ast.Name) else None
        if name in hints and i < len(params):
            passed[params[i]] = name
    for kw in call.keywords:
        if isinstance(kw.value, ast.Name) and kw.value.id in hints and kw.arg:
            passed[kw.arg] = kw.value.id
    if not passed:
        return
    inner = forward_hints(forward, list(passed), parent, depth + 1)
    for theirs, ours in passed.items():
        got, mine = inner[theirs], hints[ours]
        if mine.kind is None or (got.kind == "index" and mine.kind == "tensor"):
            mine.kind = got.kind or mine.kind
        mine.rank_min = max(mine.rank_min, got.rank_min)
        mine.last_dim = mine.last_dim or got.last_dim
        mine.literals += got.literals
        mine.optional = mine.optional or got.optional



def _annotations(fn: Any, hints: dict[str, Hint]) -> None:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return
    for name, hint in hints.items():
        p = params.get(name)
        if p is None or p.annotation is p.empty:
            continue
        text = p.annotation if isinstance(p.annotation, str) else _type_text(p.annotation)
        lowered = text.replace("typing.", "").replace("torch.", "")
        if "Optional" in lowered or "None" in lowered:
            hint.optional = True
        if "float" in lowered and "Tensor" in lowered:  # Union[float, Tensor]: a float will do
            hint.kind = hint.kind or "float"
            continue
        for word, kind in (("Tensor", "tensor"), ("Module", "module"), ("Callable", "module"),
                           ("bool", "bool"), ("int", "int"), ("float", "float"),
                           ("str", "str")):
            if word in lowered.replace("Optional", ""):
                hint.kind = hint.kind or kind
                break


def _type_text(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__name__
    origin = typing.get_origin(annotation)
    if origin is not None:
        return str(annotation)
    return str(annotation)


def _param_of(node: ast.AST, hints: dict[str, Hint]) -> str | None:
    """The parameter a node stands for (``x``, ``x.data``, ``x.detach()`` all mean ``x``)."""
    while True:
        if isinstance(node, ast.Name):
            return node.id if node.id in hints else None
        if isinstance(node, ast.Attribute) and node.attr in ("data", "T"):
            node = node.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("detach", "clone", "contiguous", "float", "double")):
            node = node.func.value
        else:
            return None


def _passed_param(node: ast.AST, hints: dict[str, Hint]) -> str | None:
    """The parameter a helper receives, also when wrapped in a list first
    (``bound_to_enum(make_list(bound))``, ``make_list(bound)[0]``, ``list(bound)``): what
    the helper compares its items with is what the parameter may hold."""
    if isinstance(node, ast.Subscript) and _int(node.slice) is not None:
        node = node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
            len(node.args) == 1 and not node.keywords:
        node = node.args[0]
    return _param_of(node, hints)


def _int(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(
            node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _int(node.operand)
        return None if inner is None else -inner
    return None


class _Visitor(ast.NodeVisitor):
    def __init__(self, hints: dict[str, Hint]):
        self.hints = hints
        self.super_calls: list[ast.Call] = []
        self.helper_calls: list[ast.Call] = []  # helper(param, ...): read helper's body too
        self.items: dict[str, str] = {}  # loop variable -> the parameter it iterates
        self.synonyms: dict[str, list[str]] = {}  # the other words of a compared tuple
        self.shapes: dict[str, ast.expr] = {}  # shape = x.shape: shape -> x
        self.tuples: dict[str, list[ast.expr]] = {}  # opt = (bound, order, dim): helper(*opt)

    def _set(self, name: str | None, kind: str) -> None:
        if name is not None:
            hint = self.hints[name]
            # index beats tensor (it is a kind of tensor); module/seq beat nothing else.
            if hint.kind in (None, "int", "float") or (kind == "index" and hint.kind == "tensor"):
                hint.kind = kind

    def _rank(self, name: str | None, rank: int) -> None:
        if name is not None:
            self.hints[name].rank_min = max(self.hints[name].rank_min, rank)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        name = _param_of(node.value, self.hints)
        if name is not None and node.attr in _TENSOR_ATTRS:
            self._set(name, "tensor")
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        value = node.value
        # x.shape[i], or shape[i] after shape = x.shape
        owner = value.value if isinstance(value, ast.Attribute) and value.attr == "shape" \
            else self.shapes.get(value.id) if isinstance(value, ast.Name) else None
        if owner is not None:
            i = _int(node.slice)
            if i is not None:
                self._rank(_param_of(owner, self.hints), i + 1 if i >= 0 else -i)
        name = _param_of(value, self.hints)
        if name is not None and isinstance(node.slice, ast.Slice):
            for bound in (node.slice.lower, node.slice.upper):  # args[:length], args[length:]
                if isinstance(bound, ast.Name) and bound.id in self.hints and bound.id != name:
                    self.hints[name].split_by = bound.id
                    self.hints[name].split_rest |= bound is node.slice.lower
        if name is not None and not (isinstance(node.slice, ast.Constant) and
                                     isinstance(node.slice.value, str)):  # cfg["tau"]: a dict
            self._set(name, "tensor")
            items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if not any(isinstance(e, ast.Constant) and e.value is Ellipsis for e in items):
                self._rank(name, sum(1 for e in items
                                     if not (isinstance(e, ast.Constant) and e.value is None)))
            for e in items:
                idx = _param_of(e, self.hints)
                if idx is not None and self.hints[idx].kind is None:
                    self.hints[idx].kind = "int"
                if isinstance(e, ast.Slice):  # x[:, :fold]: a slice bound is an int
                    for bound in (e.lower, e.upper, e.step):
                        if bound is not None:
                            self._int_arg(bound)
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult):
            left, right = _param_of(node.left, self.hints), _param_of(node.right, self.hints)
            self._set(left, "tensor")
            self._set(right, "tensor")
            if left and right:
                self.hints[left].matmul_left_of = right
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        """``n, t, c, h, w = x.size()`` (or ``x.shape``): x has one dimension per name (at
        least as many as the names beside a starred one)."""
        value = node.value
        if isinstance(value, ast.Tuple) and len(node.targets) == 1 and isinstance(
                node.targets[0], ast.Name):
            self.tuples[node.targets[0].id] = list(value.elts)
        self._pair(node)
        if isinstance(value, ast.Call) and not value.args:
            value = value.func  # x.size()
        if isinstance(value, ast.Attribute) and value.attr in ("shape", "size"):
            name = _param_of(value.value, self.hints)
            if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                self.shapes[node.targets[0].id] = value.value  # shape = x.shape; shape[4]
            for target in node.targets:
                if name is not None and isinstance(target, (ast.Tuple, ast.List)):
                    self._set(name, "tensor")
                    self._rank(name, sum(not isinstance(e, ast.Starred) for e in target.elts))
        self.generic_visit(node)

    def _pair(self, node: ast.Assign) -> None:
        """``a, b = ensure_list(flag, 2)`` or ``a, b = flag``: flag may be a tuple of that
        many values (``implicit=(True, False)``), each tried as a variant."""
        target, value = node.targets[0], node.value
        if len(node.targets) != 1 or not isinstance(target, ast.Tuple) or any(
                isinstance(e, ast.Starred) for e in target.elts):
            return
        n = len(target.elts)
        if isinstance(value, ast.Call) and value.args and any(
                _int(a) == n for a in [*value.args[1:], *(k.value for k in value.keywords)]):
            value = value.args[0]
        name = _param_of(value, self.hints)
        if name is not None and n >= 2:
            self.hints[name].pair = n

    def visit_Compare(self, node: ast.Compare) -> None:
        sides = [node.left, *node.comparators]
        for a in sides:
            name = _param_of(a, self.hints)
            if name is None:
                continue
            for b in sides:
                if isinstance(b, ast.Constant):
                    if b.value is None:
                        self.hints[name].optional = True
                    elif isinstance(b.value, int) and not isinstance(b.value, bool) and \
                            isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
                        # `mode == 0`: an integer code (a mode selector), its values listed
                        self.hints[name].literals.append(b.value)
                        self._set(name, "int")
                    elif isinstance(b.value, str):
                        self.hints[name].literals.append(b.value)
                        self._set(name, "str")
                elif isinstance(b, (ast.Tuple, ast.List, ast.Set)):
                    words = [e.value for e in b.elts
                             if isinstance(e, ast.Constant) and isinstance(e.value, str)]
                    if words:  # `b in ('dct2', 'reflect')`: synonyms; try another group next
                        self.hints[name].literals.append(words[0])
                        self.synonyms.setdefault(name, []).extend(words[1:])
                        self._set(name, "str")
        # x.dim() == 4, len(x.shape) == 4
        if len(node.comparators) == 1 and isinstance(node.ops[0], (ast.Eq, ast.GtE)):
            rank = _int(node.comparators[0])
            name = self._dim_of(node.left)
            if rank is not None and name is not None:
                self._rank(name, rank)
        self.generic_visit(node)

    def _dim_of(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("dim", "ndimension"):
            return _param_of(node.func.value, self.hints)
        if isinstance(node, ast.Attribute) and node.attr == "ndim":
            return _param_of(node.value, self.hints)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id == "len" and node.args and isinstance(node.args[0], ast.Attribute) \
                and node.args[0].attr == "shape":
            return _param_of(node.args[0].value, self.hints)
        return None

    def visit_For(self, node: ast.For) -> None:
        name = _param_of(node.iter, self.hints)
        if name is not None and self.hints[name].kind is None:
            self.hints[name].kind = "seq"
        target = node.target
        if name is not None and isinstance(target, ast.Name) and target.id not in self.hints:
            # `for b in bound: if b in ('zero', 'dct2')`: what the items are compared with
            # is what the parameter holds (one option, or a list of them)
            self.hints[target.id] = Hint()
            self.items[target.id] = name
        self.generic_visit(node)

    def merge_items(self) -> None:
        """Give each iterated parameter the options its loop variable was compared with, and
        drop the loop variables (they are not parameters); synonyms go after one word of each
        compared tuple, so that the options tried first take different branches."""
        for name, words in self.synonyms.items():
            self.hints[name].literals += words
        for item, name in self.items.items():
            got, mine = self.hints.pop(item), self.hints[name]
            if got.literals and mine.kind in (None, "seq", "int", "str"):
                # `isinstance(b, int)` beside `b in ('zero', ...)`: the words say what to pass
                words = any(isinstance(v, str) for v in got.literals)
                mine.kind = "str" if words else got.kind or "int"
                mine.literals += [v for v in got.literals if v not in mine.literals]

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        callee = _param_of(func, self.hints)
        if callee is not None:  # Fm(x)
            self.hints[callee].kind = "module"
        if isinstance(func, ast.Attribute):
            owner = _param_of(func.value, self.hints)
            if owner is not None and func.attr == "forward":  # Fm.forward(x)
                self.hints[owner].kind = "module"
            elif owner is not None and func.attr in ("size", "dim") and node.args:
                i = _int(node.args[0])
                if i is not None and func.attr == "size":
                    self._rank(owner, i + 1 if i >= 0 else -i)
            if func.attr in ("view", "reshape") and len(node.args) == 2 and \
                    _int(node.args[0]) == -1:  # t.view(-1, n): rows of n elements
                size = _param_of(node.args[1], self.hints)
                if size is not None and self.hints[size].kind in (None, "int"):
                    self.hints[size].kind, self.hints[size].row_size = "int", True
            if owner is not None and func.attr in ("view", "reshape") and len(node.args) >= 2:
                last = _int(node.args[-1])
                if last is not None and last > 0 and _int(node.args[0]) == -1:
                    self.hints[owner].last_dim = last
                    self._rank(owner, 1)
            if func.attr in ("split", "chunk") and node.args:
                if owner is not None:           # x.split(n)
                    self._int_arg(node.args[0])
                elif len(node.args) >= 2:       # torch.chunk(x, n)
                    self._set(_param_of(node.args[0], self.hints), "tensor")
                    self._int_arg(node.args[1])
            if func.attr == "save_for_backward":
                for a in node.args:
                    self._set(_param_of(a, self.hints), "tensor")
            if func.attr == "forward" and isinstance(func.value, ast.Call) and isinstance(
                    func.value.func, ast.Name) and func.value.func.id == "super":
                self.super_calls.append(node)
            namespace = isinstance(func.value, ast.Name) and func.value.id in _NAMESPACES
            self._index_call(func.attr, node, function=namespace)
            if func.attr in _MATMUL_FUNCS:
                self._matmul(node, method_owner=owner)
        if _callee_name(func) == "bernoulli":  # torch.bernoulli(p), p.bernoulli()
            method = isinstance(func, ast.Attribute) and not _namespaced(func)
            target = func.value if method else (node.args[0] if node.args else None)
            name = _param_of(target, self.hints) if target is not None else None
            if name is not None:
                self.hints[name].probability = True
        if isinstance(func, ast.Name) and any(
                _passed_param(a, self.hints) or isinstance(a, ast.Starred) for a in node.args):
            self.helper_calls.append(node)
        if isinstance(func, ast.Name) and func.id == "isinstance" and len(node.args) == 2:
            self._number_check(node.args[0], node.args[1])
        if isinstance(func, ast.Name):
            if func.id == "range" and node.args:
                for a in node.args:
                    self._int_arg(a)
                name = _param_of(node.args[0], self.hints)
                if len(node.args) == 1 and name is not None:
                    self.hints[name].count = True
            elif func.id in ("exists", "is_none"):
                for a in node.args:
                    name = _param_of(a, self.hints)
                    if name is not None:
                        self.hints[name].optional = True
            self._index_call(func.id, node, function=True)
            if func.id in _MATMUL_FUNCS:
                self._matmul(node)
        self.generic_visit(node)

    def _number_check(self, value: ast.AST, types: ast.AST) -> None:
        """``isinstance(v, Number)`` / ``(int, float)``: v is a Python number, not a tensor."""
        name = _param_of(value, self.hints)
        names = {_callee_name(t) for t in (types.elts if isinstance(types, ast.Tuple)
                                           else [types])}
        if name is not None and names & {"Number", "Real", "float", "int"}:
            self.hints[name].kind = "int" if names == {"int"} else "float"

    def _int_arg(self, node: ast.AST) -> None:
        name = _param_of(node, self.hints)
        if name is not None and self.hints[name].kind is None:
            self.hints[name].kind = "int"

    def _index_call(self, fname: str, node: ast.Call, function: bool) -> None:
        position = (_INDEX_FUNCTIONS if function else _INDEX_METHODS).get(fname)
        if position is None:
            return
        if len(node.args) > position:
            target = node.args[position]
            # target.unsqueeze(1) and friends still mean the parameter
            while isinstance(target, ast.Call) and isinstance(target.func, ast.Attribute):
                target = target.func.value
            self._set(_param_of(target, self.hints), "index")

    def _matmul(self, node: ast.Call, method_owner: str | None = None) -> None:
        args = [_param_of(a, self.hints) for a in node.args]
        if method_owner is not None:
            args = [method_owner, *args]
        for a in args[:3]:
            self._set(a, "tensor")
        if len(args) >= 2 and args[0] and args[1]:
            self.hints[args[0]].matmul_left_of = args[1]


def _callee_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else None


def _namespaced(func: ast.AST) -> bool:
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
        func.value.id in _NAMESPACES
