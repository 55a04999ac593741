"""Vocabulary of tensor operations: which calls alias, mutate, allocate or leave tensors."""

from __future__ import annotations

import re

#: Methods/attributes returning a tensor that shares storage with the receiver (views, and
#: conversions that return ``self`` when nothing changes, such as ``contiguous`` or ``to``).
VIEW_METHODS = frozenset(
    """view view_as reshape reshape_as transpose t permute expand expand_as narrow squeeze
    unsqueeze flatten unflatten select diagonal unfold as_strided split chunk unbind
    tensor_split hsplit vsplit dsplit movedim moveaxis swapaxes swapdims detach contiguous to
    type_as float double half bfloat16 cpu cuda type view_as_real view_as_complex align_to
    rename refine_names indices values crow_indices col_indices""".split()
)
VIEW_ATTRS = frozenset({"T", "mT", "H", "mH", "data", "real", "imag"})
#: ``torch.<name>(x, ...)`` returning a view of ``x``.
TORCH_VIEW_FUNCS = frozenset(
    """reshape transpose t permute narrow squeeze unsqueeze flatten unflatten select diagonal
    as_strided split chunk unbind tensor_split hsplit vsplit dsplit movedim moveaxis swapaxes
    swapdims detach view_as_real view_as_complex as_tensor asarray from_numpy""".split()
)
#: Calls returning a tuple (or a named tuple) of tensors, never a single tensor.
TUPLE_RESULT = frozenset(
    """max min sort topk kthvalue mode median nanmedian aminmax frexp unique unique_consecutive
    split chunk unbind tensor_split hsplit vsplit dsplit lu qr svd eig eigh slogdet lstsq
    histogram var_mean std_mean cummax cummin geqrf triangular_solve broadcast_tensors
    meshgrid nonzero_static sort_values""".split()
)
#: Modules whose functions return a tensor (unless listed as tuple/non-tensor results).
TENSOR_MODULES = frozenset({"torch", "torch.nn.functional", "torch.special", "torch.fft"})
#: Methods and attributes whose result is not a tensor.
NON_TENSOR_METHODS = frozenset(
    """size dim numel item tolist stride is_contiguous data_ptr element_size nelement
    ndimension get_device is_floating_point is_complex is_signed storage_offset untyped_storage
    is_set_to is_shared is_pinned __len__ numpy equal has_names""".split()
)
NON_TENSOR_ATTRS = frozenset(
    """shape dtype device ndim requires_grad is_cuda is_sparse is_quantized is_meta layout
    names grad_fn is_leaf output_nr _version itemsize nbytes""".split()
)
#: ``torch.<name>`` callables that do not return tensors.
TORCH_NON_TENSOR = frozenset(
    """is_tensor is_storage numel is_grad_enabled is_inference_mode_enabled get_default_dtype
    Size finfo iinfo device dtype broadcast_shapes is_floating_point is_complex result_type
    promote_types can_cast no_grad enable_grad set_grad_enabled inference_mode equal
    is_nonzero manual_seed seed initial_seed get_rng_state typename is_autocast_enabled""".split()
)
#: Uses of a name that prove it is a tensor (attribute or method names).
#: (Names shared with str or nn.Module, such as split, to, cuda, float, are left out.)
TENSOR_EVIDENCE = frozenset(
    """shape dtype device ndim dim size numel view reshape clone detach t T mT transpose
    permute expand expand_as contiguous unsqueeze squeeze flatten narrow sum mean abs exp log
    sigmoid tanh relu clamp clamp_min clamp_max mm bmm matmul mul div add sub pow sqrt
    masked_fill new_zeros new_ones new_empty new_full new_tensor requires_grad is_contiguous
    type_as view_as chunk unbind index_select gather scatter norm sign argmax argmin softmax
    log_softmax neg reciprocal rsqrt data_ptr stride storage_offset element_size nelement""".split()
)
#: Allocating functions whose float dtype defaults to the global default (float32).
ALLOC_NO_DTYPE = frozenset({"zeros", "ones", "empty", "rand", "randn"})
#: Legacy constructors: ignore the input's dtype/device, deprecated in favour of factories.
LEGACY_CTORS = frozenset(
    """Tensor FloatTensor DoubleTensor HalfTensor BFloat16Tensor LongTensor IntTensor
    ShortTensor CharTensor ByteTensor BoolTensor""".split()
)
#: Expensive gradient computations (matrix products and convolutions).
EXPENSIVE = frozenset(
    """mm bmm matmul einsum addmm addbmm baddbmm tensordot linear bilinear conv1d conv2d
    conv3d conv_transpose1d conv_transpose2d conv_transpose3d conv1d_input conv1d_weight
    conv2d_input conv2d_weight conv3d_input conv3d_weight kron chain_matmul multi_dot""".split()
)
#: Trailing-underscore methods that do not modify the tensor's values.
_NOT_MUTATING = frozenset({"requires_grad_", "share_memory_", "retain_grad_", "pin_memory_"})
_INPLACE = re.compile(r"^[a-z][a-z0-9_]*[a-z0-9]_$")


def is_inplace_name(name: str) -> bool:
    """Whether a method or ``torch.`` function name denotes an in-place operation.

    Example:
        >>> is_inplace_name("mul_"), is_inplace_name("mul"), is_inplace_name("requires_grad_")
        (True, False, False)
    """
    return bool(_INPLACE.match(name)) and name not in _NOT_MUTATING
