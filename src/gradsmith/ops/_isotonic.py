"""Batched isotonic regression by pool-adjacent-violators (PAV), vectorised in torch.

Both solvers fit a *decreasing* sequence to every row of a 2-d tensor (the convention of Blondel
et al. 2020 and of torchsort):

- :func:`isotonic_l2` solves ``argmin_{v_1 >= ... >= v_n} 0.5 ||v - y||^2``; a pooled block takes
  the mean of its ``y``.
- :func:`isotonic_kl` solves ``argmin_{v_1 >= ... >= v_n} <exp(y - v), 1> + <exp(w), v>``; a pooled
  block takes ``logsumexp(y_B) - logsumexp(w_B)``.

Sequential PAV walks each row with a stack, which in Python is far too slow. On CPU a small C
kernel (``_pav_native``, built once with the system compiler) runs it; without a compiler (or
with ``GRADSMITH_PAV=torch``) ``_pav`` finds the blocks for all rows at once in a few vectorised
rounds and the block values come from exact block sums (float64) or block log-sum-exps. Both
paths compute in float64 and give the same blocks.

Both solvers also return each element's row-local block id (0 for a row's first block), all the
backward needs: the Jacobian of the solution is a block average (l2) or a block softmax (kl).

The solvers are registered as ``torch.library`` custom ops so that ``torch.compile`` treats the
data-dependent loop as one opaque call (``fullgraph=True`` works), with their own autograd
formulas so that a ``torch.export``-ed soft sort keeps its gradient.
"""

from __future__ import annotations

import torch

from gradsmith.ops import _pav_cuda, _pav_native
from gradsmith.ops._pav import KLStats, L2Stats, solve

__all__ = ["isotonic_l2", "isotonic_kl", "block_sum", "block_mean", "block_softmax",
           "block_softmax_sum", "is_traced", "native_lib"]


def _blocks(bounds: torch.Tensor) -> tuple[torch.Tensor, int]:
    block = bounds.cumsum(0) - 1
    return block, int(block[-1]) + 1


def _local(block: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    block = block.view(shape)
    return block - block[:, :1]


def _segment_logsumexp(x: torch.Tensor, group: torch.Tensor, size: int) -> torch.Tensor:
    top = x.new_full((size,), -torch.inf).scatter_reduce_(0, group, x, "amax")
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    total = x.new_zeros(size).index_add_(0, group, (x - top[group]).exp())
    return total.log() + top


def _solve_l2(y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    lib = _pav_native.load() if y.device.type == "cpu" else None
    if lib is not None:
        sol, block = _pav_native.solve_l2(lib, y)
        return sol.to(y.dtype), block
    kernel = _pav_cuda.load(y.device, "l2", y.dtype) if y.is_cuda else None
    if kernel is not None:  # on the GPU, asynchronously: no host round trip
        return _pav_cuda.solve_l2(kernel, y)
    rows, n = y.shape
    bounds = solve(L2Stats(y), rows, n, y.device)
    block, size = _blocks(bounds)
    # Final values from exact block sums (float64), not from prefix-sum differences.
    flat = y.reshape(-1).double()
    sums = flat.new_zeros(size).index_add_(0, block, flat)
    counts = torch.bincount(block, minlength=size)
    sol = (sums / counts).index_select(0, block)
    return sol.view(y.shape).to(y.dtype), _local(block, y.shape)


def _solve_kl(y: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    lib = _pav_native.load() if y.device.type == "cpu" else None
    if lib is not None:
        sol, block = _pav_native.solve_kl(lib, y, w)
        return sol.to(y.dtype), block
    kernel = _pav_cuda.load(y.device, "kl", y.dtype) if y.is_cuda else None
    if kernel is not None:
        return _pav_cuda.solve_kl(kernel, y, w)
    rows, n = y.shape
    bounds = solve(KLStats(y, w), rows, n, y.device)
    block, size = _blocks(bounds)
    lse_y = _segment_logsumexp(y.reshape(-1).double(), block, size)
    lse_w = _segment_logsumexp(w.reshape(-1).double(), block, size)
    sol = (lse_y - lse_w).index_select(0, block)
    return sol.view(y.shape).to(y.dtype), _local(block, y.shape)


def _check_2d(name: str, y: torch.Tensor) -> None:
    if y.dim() != 2:
        raise RuntimeError(f"{name}: expected a 2-d tensor (rows, n), got shape {tuple(y.shape)}")


def _isotonic_l2_impl(y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    _check_2d("isotonic_l2", y)
    if y.numel() == 0:
        return y.clone(), torch.zeros(y.shape, dtype=torch.int64, device=y.device)
    return _solve_l2(y.contiguous())


def _isotonic_kl_impl(y: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    _check_2d("isotonic_kl", y)
    if y.numel() == 0:
        return y.clone(), torch.zeros(y.shape, dtype=torch.int64, device=y.device)
    return _solve_kl(y.contiguous(), w.expand_as(y).contiguous())


@torch.library.custom_op("gradsmith::isotonic_l2", mutates_args=())
def _isotonic_l2_op(y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return _isotonic_l2_impl(y)


@_isotonic_l2_op.register_fake
def _(y):
    return torch.empty_like(y), torch.empty(y.shape, dtype=torch.int64, device=y.device)


@torch.library.custom_op("gradsmith::isotonic_kl", mutates_args=())
def _isotonic_kl_op(y: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return _isotonic_kl_impl(y, w)


@_isotonic_kl_op.register_fake
def _(y, w):
    return torch.empty_like(y), torch.empty(y.shape, dtype=torch.int64, device=y.device)


def _l2_setup(ctx, inputs, output):
    ctx.save_for_backward(output[1])


def _l2_backward(ctx, grad, _grad_block):
    (block,) = ctx.saved_tensors
    return block_mean(grad, block)


def _kl_setup(ctx, inputs, output):
    # w itself, not w.expand_as(y): setup_context runs without grad, and a view made here
    # would cut the double backward's path to w.
    y, w = inputs
    ctx.save_for_backward(y, w, output[1])


def _kl_backward(ctx, grad, _grad_block):
    y, w, block = ctx.saved_tensors
    # A block's value is logsumexp(y_B) - logsumexp(w_B): its gradients are block softmaxes.
    gy = block_softmax_sum(y, grad, block) if ctx.needs_input_grad[0] else None
    gw = None
    if ctx.needs_input_grad[1]:
        gw = -block_softmax_sum(w.expand_as(y), grad, block)
        gw = gw.sum_to_size(w.shape) if gw.shape != w.shape else gw
    return gy, gw


# The ops' own gradient formulas: torch.export traces soft_rank/soft_sort through their
# Functions down to these ops, so without them an exported program could not be trained
# (docs/ops.md, Deployment). Differentiable (block_mean/block_softmax_sum are torch ops when
# a graph is recorded): double backward works too.
_isotonic_l2_op.register_autograd(_l2_backward, setup_context=_l2_setup)
_isotonic_kl_op.register_autograd(_kl_backward, setup_context=_kl_setup)


def is_traced(y: torch.Tensor) -> bool:
    """Compiling, or a tensor subclass/wrapper: go through the registered op (fake impl etc.)."""
    return torch.compiler.is_compiling() or type(y) is not torch.Tensor or (
        torch._C._functorch.is_functorch_wrapped_tensor(y))


def isotonic_l2(y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Decreasing isotonic regression (squared loss) of every row of ``y``.

    Args:
        y: ``(rows, n)`` floating tensor.

    Returns:
        ``(solution, block)``: the fit, same shape and dtype as ``y``, and each element's block
        id (int64, row-local: 0 for each row's first block; a block never spans two rows).

    Example:
        >>> sol, block = isotonic_l2(torch.tensor([[3.0, 1.0, 2.0]]))
        >>> sol
        tensor([[3.0000, 1.5000, 1.5000]])
        >>> block
        tensor([[0, 1, 1]])
    """
    if is_traced(y):
        return torch.ops.gradsmith.isotonic_l2(y)
    return _isotonic_l2_impl(y)  # eager: skip ~75 us of custom-op dispatch


def isotonic_kl(y: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Decreasing isotonic optimisation with the KL objective of Blondel et al. (2020), eq. (7).

    Args:
        y: ``(rows, n)`` floating tensor.
        w: tensor broadcastable to ``y``.

    Returns:
        ``(solution, block)`` as for :func:`isotonic_l2`; a block's value is
        ``logsumexp(y_B) - logsumexp(w_B)``.

    Example:
        >>> sol, _ = isotonic_kl(torch.tensor([[0.0, 0.0]]), torch.tensor([[0.0, 1.0]]))
        >>> sol  # already decreasing: no pooling
        tensor([[ 0., -1.]])
    """
    if is_traced(y):
        return torch.ops.gradsmith.isotonic_kl(y, w)
    return _isotonic_kl_impl(y, w)


def block_sum(values: torch.Tensor, block: torch.Tensor) -> torch.Tensor:
    """Sum of ``values`` over each element's block, broadcast back to the elements.

    ``block`` holds row-local block ids (``0 <= id < n`` along the last dim, as the solvers
    return them), so the buffer has one slot per element whatever the data, and the
    function works unchanged on a per-sample slice under ``vmap``. Differentiable in ``values``
    (a fixed linear map): backward passes built from it support double backward.

    Example:
        >>> block_sum(torch.tensor([[1.0, 2.0, 4.0]]), torch.tensor([[0, 1, 1]]))
        tensor([[1., 6., 6.]])
    """
    n = values.shape[-1]
    rows = values.reshape(-1, n)
    offsets = torch.arange(rows.shape[0], device=values.device).unsqueeze(1) * n
    keys = (block.reshape(-1, n) + offsets).reshape(-1)
    sums = values.new_zeros(keys.numel()).index_add(0, keys, rows.reshape(-1))
    # index_select, not sums[keys]: advanced indexing is ~10x slower on CPU with threads.
    return sums.index_select(0, keys).view(values.shape)


def _keys(block: torch.Tensor) -> torch.Tensor:
    n = block.shape[-1]
    rows = block.reshape(-1, n)
    offsets = torch.arange(rows.shape[0], device=block.device).unsqueeze(1) * n
    return (rows + offsets).reshape(-1)


def native_lib(*tensors: torch.Tensor):
    """The native kernel for plain eager CPU float32/float64 data (``tensors[0]``) with no graph
    being recorded through any of ``tensors``; None otherwise (traced, other devices or dtypes,
    a double backward that needs torch ops, or no compiler)."""
    values = tensors[0]
    if (values.device.type != "cpu" or values.dtype not in (torch.float32, torch.float64)
            or any(is_traced(t) for t in tensors)
            or (torch.is_grad_enabled() and any(t.requires_grad for t in tensors))):
        return None
    return _pav_native.load()


def block_mean(values: torch.Tensor, block: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` over each element's block (the Jacobian of the l2 solution).

    One key computation and two ``index_add`` (sums and sizes) instead of two :func:`block_sum`
    calls; ``index_add`` rather than ``bincount`` so it stays batched under ``vmap``.

    Example:
        >>> block_mean(torch.tensor([[1.0, 2.0, 4.0]]), torch.tensor([[0, 1, 1]]))
        tensor([[1., 3., 3.]])
    """
    lib = native_lib(values, block)
    if lib is not None:
        n = values.shape[-1]
        out = _pav_native.block_mean(lib, values.reshape(-1, n), block.reshape(-1, n))
        return out.view(values.shape)
    keys = _keys(block)
    flat = values.reshape(-1)
    sums = flat.new_zeros(keys.numel()).index_add(0, keys, flat)
    sizes = flat.new_zeros(keys.numel()).index_add_(0, keys, flat.new_ones(()).expand_as(flat))
    return (sums / sizes.clamp(min=1)).index_select(0, keys).view(values.shape)


def block_softmax(values: torch.Tensor, block: torch.Tensor) -> torch.Tensor:
    """Softmax of ``values`` within each block (the Jacobian weights of the KL solution).

    The per-block maximum only stabilises the exponentials (softmax is shift invariant), so it is
    detached; the result stays differentiable in ``values`` for double backward. ``block`` holds
    row-local ids as for :func:`block_sum`.

    Example:
        >>> block_softmax(torch.tensor([[0.0, 0.0, 5.0]]), torch.tensor([[0, 0, 1]]))
        tensor([[0.5000, 0.5000, 1.0000]])
    """
    n = values.shape[-1]
    rows = values.detach().reshape(-1, n)
    offsets = torch.arange(rows.shape[0], device=values.device).unsqueeze(1) * n
    keys = (block.reshape(-1, n) + offsets).reshape(-1)
    top = rows.new_full((keys.numel(),), -torch.inf).scatter_reduce(0, keys, rows.reshape(-1),
                                                                    "amax")
    shifted = (values - top.index_select(0, keys).view(values.shape)).exp()
    return shifted / block_sum(shifted, block)


def block_softmax_sum(s: torch.Tensor, g: torch.Tensor, block: torch.Tensor) -> torch.Tensor:
    """``block_softmax(s, block) * block_sum(g, block)``: the kl backward's block term.

    Runs the native kernel when no graph is being recorded (one pass instead of a dozen
    tensor ops), and the differentiable composition otherwise.

    Example:
        >>> block_softmax_sum(torch.tensor([[0.0, 0.0, 5.0]]), torch.tensor([[1.0, 3.0, 2.0]]),
        ...                   torch.tensor([[0, 0, 1]]))
        tensor([[2., 2., 2.]])
    """
    lib = native_lib(s, g, block)
    if lib is not None:
        n = s.shape[-1]
        out = _pav_native.block_softmax_sum(lib, s.reshape(-1, n), g.reshape(-1, n),
                                            block.reshape(-1, n))
        return out.view(s.shape)
    return block_softmax(s, block) * block_sum(g, block)
