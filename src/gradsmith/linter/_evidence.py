"""Is a name a tensor? Evidence from annotations, defaults, guards and uses in one method.

Forward arguments are often not tensors (process groups, handles, quantization state,
numbers), and integer index tensors (``cu_seqlens``) carry no graph. Rules that would report
an error for a tensor need positive evidence; anything else stays unknown.
"""

from __future__ import annotations

import ast
import re

from gradsmith.linter import _tensors as T
from gradsmith.linter._discovery import Method
from gradsmith.linter._flow import walk_shallow
from gradsmith.linter._symbols import dotted

#: Parameter names that (without evidence to the contrary) hold Python numbers or flags.
HYPERPARAMS = frozenset(
    """dim dims axis axes keepdim stride strides padding dilation kernel_size groups training
    inplace reduction eps epsilon momentum output_size ndim num_groups bits n_bits num_bits
    ceil_mode count_include_pad align_corners mode""".split()
)
#: Keyword arguments whose values are never tensors (collectives, factories, streams).
_NON_TENSOR_KW = frozenset(
    """group process_group pg dtype device async_op stream src dst op layout memory_format
    requires_grad pin_memory non_blocking generator""".split()
)
#: Methods that exist on non-tensors (process groups, handles, modules) but not on tensors.
_NON_TENSOR_METHODS = frozenset(
    """rank wait is_completed synchronize record wait_stream get_world_size
    parameters named_parameters modules state_dict""".split()
)
#: Name parts of integer index / boolean mask tensors (no graph, nothing to leak).
_INDEX_PARTS = frozenset(
    """cu seqlens seqlen indices index idx ids inds offsets offset lengths lens positions
    mask masks indptr ptr counts cnt splits perm""".split()
)
#: torch callables whose first argument is not (necessarily) a tensor.
_NOT_TENSOR_FIRST = frozenset(
    """tensor as_tensor asarray from_numpy full zeros ones empty rand randn randint randperm
    arange linspace logspace eye manual_seed is_tensor numel device dtype Size
    broadcast_shapes finfo iinfo set_grad_enabled no_grad enable_grad inference_mode
    get_default_dtype set_default_dtype promote_types result_type can_cast empty_strided
    scalar_tensor tril_indices triu_indices""".split()
)
_INT_DTYPES = re.compile(r"\b(long|int|int8|int16|int32|int64|uint8|bool|short)\b")


def index_like(name: str) -> bool:
    """Whether ``name`` reads as integer index metadata or a mask (``cu_seqlens``, ``idx``).

    Example:
        >>> index_like("cu_seqlens"), index_like("chunk_indices"), index_like("weight")
        (True, True, False)
    """
    return any(part in _INDEX_PARTS for part in name.lower().split("_"))


#: Annotation names that are certainly not tensors (tensor subclasses are user classes).
_NOT_TENSOR_TYPES = frozenset(
    """int float bool str bytes complex None NoneType Optional Union List list Tuple tuple
    Dict dict Set set Sequence Iterable Callable ProcessGroup dtype device Stream Event
    Literal typing torch dist distributed cuda""".split()
)
_WORDS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _annotation(arg: ast.arg) -> bool | None:
    """True for ``Tensor`` / ``Optional[Tensor]``, False for builtins, process groups and
    containers, None for unions with other types and for user classes (tensor subclasses)."""
    words = set(_WORDS.findall(ast.unparse(arg.annotation)))
    tensorish = {w for w in words if w.endswith("Tensor") or w == "Parameter"}
    rest = words - tensorish - {"torch", "nn", "Optional", "None", "typing"}
    if tensorish:
        if rest & {"List", "list", "Tuple", "tuple", "Sequence", "Iterable", "Dict", "dict"}:
            return False  # a container of tensors is not a tensor
        return True if not rest - {"Union"} else None
    return False if words <= _NOT_TENSOR_TYPES else None


def _isinstance_target(node: ast.Call) -> tuple[str, bool] | None:
    """``isinstance(name, T)``: (name, whether T is a tensor type)."""
    if not (isinstance(node.func, ast.Name) and node.func.id == "isinstance"
            and len(node.args) == 2 and isinstance(node.args[0], ast.Name)):
        return None
    text = ast.unparse(node.args[1])
    return node.args[0].id, "Tensor" in text or "Parameter" in text


def evidence(method: Method, names: list[str], ctx: str | None,
             resolve=None, returned: bool = True,
             passed: frozenset[str] = frozenset(),
             by_name: bool = True) -> dict[str, bool | None]:
    """Is each name a tensor? True/False with evidence from ``method``, None if unknown.

    Strong evidence against (a builtin or process-group annotation, use as ``group=``,
    ``.rank()``, being called) beats ambiguity (a union annotation, a user class that may be a
    tensor subclass, an ``isinstance`` test), which beats uses as a tensor, which beat weak
    evidence against (a non-None constant default, ``int(x)``, a hyper-parameter name).
    ``returned``: whether being returned by forward counts as evidence (not when asking
    whether a returned value is a tensor). ``passed``: names some call site passes a
    tensor for (``Fn.apply(x, torch.ones(3))``), which beats a number as default.
    ``by_name``: whether a hyper-parameter name alone (``dim``, ``groups``) counts as weak
    evidence against; rules that report an error for a non-tensor pass False.
    """
    found: dict[str, bool | None] = dict.fromkeys(names)
    strong_false, weak_false, ambiguous = set(), set(), set()
    args = method.node.args
    positional = [*args.posonlyargs, *args.args]
    for arg in [*positional, *args.kwonlyargs]:
        if arg.arg in found and arg.annotation is not None:
            verdict = _annotation(arg)
            if verdict is False:
                strong_false.add(arg.arg)
            elif verdict is None:
                ambiguous.add(arg.arg)
            else:
                found[arg.arg] = True
    defaults = zip([a.arg for a in positional[len(positional) - len(args.defaults):]],
                   args.defaults)
    for name, default in defaults:
        if name in found and isinstance(default, ast.Constant) and default.value is not None:
            weak_false.add(name)

    def mark(expr, value=True):
        if isinstance(expr, ast.Name) and expr.id in found:
            found[expr.id] = value if found[expr.id] is None or value else found[expr.id]

    for node in walk_shallow(method.node):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            name = node.value.id
            if name not in found:
                continue
            if node.attr in _NON_TENSOR_METHODS:
                strong_false.add(name)
            elif node.attr in T.TENSOR_EVIDENCE or T.is_inplace_name(node.attr):
                found[name] = True
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            mark(node.left)
            mark(node.right)
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Compare):
            mark(node.value)  # boolean-mask indexing: x[x < 0]
        elif isinstance(node, ast.Return) and returned and method.name == "forward" \
                and node.value is not None:
            values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            for value in values:
                mark(value)  # forward outputs are tensors
        elif isinstance(node, ast.Call):
            _call_evidence(node, found, strong_false, weak_false, ambiguous, ctx, resolve, mark)
    for name in passed & set(names):
        weak_false.discard(name)
        if name not in strong_false and name not in ambiguous:
            found[name] = True
    for name in names:
        if name in strong_false:
            found[name] = False
        elif name in ambiguous:
            found[name] = None
        elif found[name] is None and (
                name in weak_false or (by_name and name in HYPERPARAMS)):
            found[name] = False
    return found


def _call_evidence(node: ast.Call, found, strong_false, weak_false, ambiguous, ctx, resolve,
                   mark) -> None:
    func = node.func
    if isinstance(func, ast.Name) and func.id in found:
        strong_false.add(func.id)  # called: a function or module
    guard = _isinstance_target(node)
    if guard is not None and guard[0] in found:
        ambiguous.add(guard[0])  # tested against a type: it may be either
    for kw in node.keywords:
        if kw.arg in _NON_TENSOR_KW and isinstance(kw.value, ast.Name) and kw.value.id in found:
            strong_false.add(kw.value.id)
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
            func.value.id == ctx and func.attr in ("mark_dirty", "mark_non_differentiable"):
        for arg in node.args:
            mark(arg)
    elif isinstance(func, ast.Attribute) and func.attr == "size" and node.args:
        mark(func.value)  # x.size(0): a process group's size() takes no argument
    elif isinstance(func, ast.Name) and func.id in ("int", "float", "range", "bool"):
        for arg in node.args:
            if isinstance(arg, ast.Name) and arg.id in found:
                weak_false.add(arg.id)
    elif resolve is not None and node.args and isinstance(node.args[0], ast.Name) \
            and node.args[0].id in found and _torch_tensor_call(node, resolve):
        mark(node.args[0])  # torch.sigmoid(x), F.relu(x): x is a tensor


def _torch_tensor_call(node: ast.Call, resolve) -> bool:
    parts = dotted(node.func)
    qual = resolve(parts) if parts else None
    if not qual:
        return False
    module, _, name = qual.rpartition(".")
    return module in T.TENSOR_MODULES | {"torch.linalg"} and name not in _NOT_TENSOR_FIRST


def integer_tensor(method: Method, name: str) -> bool:
    """Whether ``name`` holds integer indices or a mask in ``method``: its name reads so, or
    it is used as an index / ``index=`` argument, or converted with ``.long()``/``.int()``."""
    if index_like(name):
        return True
    for node in walk_shallow(method.node):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Name) \
                and node.slice.id == name:
            return True
        if isinstance(node, ast.Call):
            if any(k.arg in ("index", "indices") and isinstance(k.value, ast.Name)
                   and k.value.id == name for k in node.keywords):
                return True
            func = node.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                    and func.value.id == name and func.attr in ("long", "int", "bool"):
                return True
    return False


__all__ = ["HYPERPARAMS", "evidence", "index_like", "integer_tensor"]
