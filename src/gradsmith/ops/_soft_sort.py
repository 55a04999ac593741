"""Differentiable sorting and ranking: projections onto the permutahedron (Blondel et al. 2020).

``soft_sort`` sorts ascending and ``soft_rank`` ranks from 1 (smallest) to n (largest), over the
last dimension of any batch shape, with the conventions and values of torchsort. As the
regularization strength goes to 0 they become the hard sort and rank; as it grows they flatten
towards the mean.

Forward: one sort plus isotonic regression by pool-adjacent-violators (``_isotonic``).
Backward: the isotonic solution's Jacobian is block-diagonal in sorted order (a block average for
"l2", a block softmax for "kl"), applied with a few gathers and index sums, vectorised over the
batch. The backward is built from differentiable ops on a recomputed sort, so double backward is
correct (it is zero almost everywhere for "l2", where the map is piecewise linear).
"""

from __future__ import annotations

import torch
from torch import nn

from gradsmith._errors import GradsmithError
from gradsmith._example import example
from gradsmith.ops import _pav_native
from gradsmith.ops._isotonic import (
    block_mean,
    block_softmax_sum,
    isotonic_kl,
    isotonic_l2,
    native_lib,
)
from gradsmith.ops._validate import (
    check_choice,
    check_devices,
    check_fits,
    check_floating,
    check_positive,
)

__all__ = ["soft_rank", "soft_sort", "SoftRank", "SoftSort"]

_REGULARIZATIONS = ("l2", "kl")


def _descending_weights(n: int, like: torch.Tensor) -> torch.Tensor:
    return torch.arange(n, 0, -1, dtype=like.dtype, device=like.device)


def _sort_desc(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of ``t`` sorted descending, and the permutation (torch.sort's order, stable).

    Eager CPU float32/float64 rows use the native radix argsort when it is available; anything
    traced (compile, vmap, subclasses) or without a compiler goes through ``torch.sort``.
    """
    lib = native_lib(t)
    if lib is not None:
        perm = _pav_native.argsort_desc(lib, t)
        return t.gather(-1, perm), perm
    return t.sort(dim=-1, descending=True, stable=True)


def _scatter_back(sorted_values: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
    # Out of place (differentiable for double backward); every slot is written, so no zeros.
    return torch.empty_like(sorted_values).scatter(-1, perm, sorted_values)


# The KL soft rank is exactly the hard rank (a constant, zero gradient) while no block pools:
# on _example_input, strength 0.5 pools none (every gradient 0, an unexercised row), 3.0 pools
# every element (a non-zero gradient everywhere, checked against tests/ops/catalog.py's reference).
_RANK_KL_STRENGTH = 3.0


def _example_input() -> torch.Tensor:
    # Well-separated values keep finite differences away from the kinks between pooled blocks.
    gen = torch.Generator().manual_seed(0)
    return (torch.randperm(12, generator=gen).double() * 0.37).view(2, 6).requires_grad_()


@example(lambda: (_example_input(), "l2", 1.0), name="l2")
@example(lambda: (_example_input(), "kl", _RANK_KL_STRENGTH), name="kl")
class _SoftRankFn(torch.autograd.Function):
    """Returns (ranks, perm, block); perm and block only carry the sort to the backward."""

    @staticmethod
    def forward(x, regularization, strength):
        n = x.shape[-1]
        theta = x.reshape(-1, n) / strength
        s, perm = _sort_desc(theta)
        w = _descending_weights(n, s)
        if regularization == "l2":
            dual, block = isotonic_l2(s - w)
            ranks = s - dual
        else:
            dual, block = isotonic_kl(s, w.log())
            ranks = (s - dual).exp()
        out = _scatter_back(ranks, perm)
        return out.view(x.shape), perm.view(x.shape), block.view(x.shape)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, regularization, strength = inputs
        out, perm, block = output
        ctx.mark_non_differentiable(perm, block)
        ctx.regularization, ctx.strength = regularization, strength
        if regularization == "l2":
            ctx.save_for_backward(perm, block)
        else:
            ctx.save_for_backward(perm, block, x, out)

    @staticmethod
    def backward(ctx, grad, _grad_perm, _grad_block):
        if not ctx.needs_input_grad[0]:
            return None, None, None
        perm, block, *kl = ctx.saved_tensors
        n = grad.shape[-1]
        perm, block = perm.reshape(-1, n), block.reshape(-1, n)
        if ctx.regularization == "l2":
            g = grad.reshape(-1, n).gather(-1, perm)
            g = g - block_mean(g, block)
        else:
            x, out = kl
            g = (grad * out).reshape(-1, n).gather(-1, perm)
            s = (x.reshape(-1, n) / ctx.strength).gather(-1, perm)
            g = g - block_softmax_sum(s, g, block)
        return (_scatter_back(g, perm) / ctx.strength).view(grad.shape), None, None

    @staticmethod
    def vmap(info, in_dims, x, regularization, strength):
        # The op already maps over every leading dim: move the vmapped dim in front.
        x = x.movedim(in_dims[0], 0) if in_dims[0] is not None else x
        dim = 0 if in_dims[0] is not None else None
        return _SoftRankFn.apply(x, regularization, strength), (dim, dim, dim)


@example(lambda: (_example_input(), "l2", 1.0), name="l2")
@example(lambda: (_example_input(), "kl", 0.5), name="kl")
class _SoftSortFn(torch.autograd.Function):
    """Returns (sorted, perm, block); perm and block only carry the sort to the backward."""

    @staticmethod
    def forward(x, regularization, strength):
        n = x.shape[-1]
        # Sorting -x descending gives x ascending, torchsort's direction.
        s, perm = _sort_desc(x.reshape(-1, n).neg())
        w = _descending_weights(n, s) / strength
        if regularization == "l2":
            sol, block = isotonic_l2(w - s)
        else:
            sol, block = isotonic_kl(w.expand_as(s), s)
        return (sol - w).view(x.shape), perm.view(x.shape), block.view(x.shape)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, regularization, _ = inputs
        _, perm, block = output
        ctx.mark_non_differentiable(perm, block)
        ctx.regularization = regularization
        if regularization == "l2":
            ctx.save_for_backward(perm, block)
        else:
            ctx.save_for_backward(perm, block, x)

    @staticmethod
    def backward(ctx, grad, _grad_perm, _grad_block):
        if not ctx.needs_input_grad[0]:
            return None, None, None
        perm, block, *kl = ctx.saved_tensors
        n = grad.shape[-1]
        perm, block = perm.reshape(-1, n), block.reshape(-1, n)
        g = grad.reshape(-1, n)
        if ctx.regularization == "l2":
            g = block_mean(g, block)
        else:
            s = kl[0].reshape(-1, n).neg().gather(-1, perm)
            g = block_softmax_sum(s, g, block)
        return _scatter_back(g, perm).view(grad.shape), None, None

    @staticmethod
    def vmap(info, in_dims, x, regularization, strength):
        x = x.movedim(in_dims[0], 0) if in_dims[0] is not None else x
        dim = 0 if in_dims[0] is not None else None
        return _SoftSortFn.apply(x, regularization, strength), (dim, dim, dim)


def _validate(fn: str, x, regularization, regularization_strength) -> float:
    check_floating(fn, "x", x)
    check_devices(fn, ("x", x))
    if x.dim() == 0:
        raise GradsmithError(
            f"{fn}: x must have at least 1 dimension (it works over the last one), got a 0-d "
            f"tensor; pass x.reshape(1, -1) or a batch of vectors"
        )
    check_choice(fn, "regularization", regularization, _REGULARIZATIONS)
    strength = check_positive(fn, "regularization_strength", regularization_strength)
    # x / strength and the weights n / strength must stay finite and nonzero in x's dtype
    check_fits(fn, "regularization_strength", strength, x.dtype)
    check_fits(fn, "1 / regularization_strength", 1.0 / strength, x.dtype)
    return strength


def _widen(x: torch.Tensor) -> torch.Tensor:
    # Half-precision sorts tie constantly and the weights (n, ..., 1) are not representable
    # beyond 256: solve in float32 and round the result once.
    return x.float() if x.dtype in (torch.bfloat16, torch.float16) else x


@example(lambda: (_example_input(), "l2", 1.0), name="l2")
@example(lambda: (_example_input(), "kl", _RANK_KL_STRENGTH), name="kl")
def soft_rank(x: torch.Tensor, regularization: str = "l2",
              regularization_strength: float = 1.0) -> torch.Tensor:
    """Soft ranks of ``x`` along its last dimension (1 = smallest), Blondel et al. (2020).

    ``soft_rank(x) = P(-x / eps, (n, ..., 1))`` mapped back to ranks: the projection of ``x / eps``
    onto the permutahedron of ``(1, ..., n)`` with squared ("l2") or entropic ("kl")
    regularization ``eps = regularization_strength``. Small ``eps`` approaches the hard ranks
    ``x.argsort().argsort() + 1``; large ``eps`` pulls every rank to ``(n + 1) / 2`` ("l2").

    Gradient: in sorted order ``(I - A) / eps`` with ``A`` the average over each pooled block
    ("l2"), or ``diag(r) (I - P) / eps`` with ``P`` the softmax of each block ("kl").

    Args:
        x: floating tensor ``(..., n)``; every leading dimension is a batch dimension.
        regularization: ``"l2"`` (piecewise linear) or ``"kl"`` (smooth, positive ranks).
        regularization_strength: ``eps > 0``.

    Returns:
        Tensor of the same shape and dtype as ``x``.

    Raises:
        GradsmithError: for a non-floating or 0-d ``x``, an unknown ``regularization`` or
            ``regularization_strength <= 0``.

    Example:
        >>> soft_rank(torch.tensor([[3.0, 1.0, 2.0]]), regularization_strength=0.1)
        tensor([[3., 1., 2.]])

    References:
        Blondel, Teboul, Berthet, Djolonga. "Fast Differentiable Sorting and Ranking", ICML 2020.
    """
    eps = _validate("soft_rank", x, regularization, regularization_strength)
    if x.shape[-1] == 0:  # empty rows: nothing to order (and no row length to reshape by)
        return x.clone()
    return _SoftRankFn.apply(_widen(x), regularization, eps)[0].to(x.dtype)


@example(lambda: (_example_input(), "l2", 1.0), name="l2")
@example(lambda: (_example_input(), "kl", 0.5), name="kl")
def soft_sort(x: torch.Tensor, regularization: str = "l2",
              regularization_strength: float = 1.0) -> torch.Tensor:
    """Soft ascending sort of ``x`` along its last dimension, Blondel et al. (2020).

    The projection of ``(n, ..., 1) / eps`` onto the permutahedron of ``x`` (squared or entropic
    regularization, ``eps = regularization_strength``), read in ascending order. Small ``eps``
    approaches ``x.sort(-1).values``; the sum over the last dimension is always preserved ("l2").

    Gradient: in sorted order, the average over each pooled block ("l2") or the block softmax of
    the sorted values ("kl"), scattered back to the input positions.

    Args:
        x: floating tensor ``(..., n)``; every leading dimension is a batch dimension.
        regularization: ``"l2"`` or ``"kl"``.
        regularization_strength: ``eps > 0``.

    Returns:
        Tensor of the same shape and dtype as ``x``, ascending along the last dimension.

    Raises:
        GradsmithError: for a non-floating or 0-d ``x``, an unknown ``regularization`` or
            ``regularization_strength <= 0``.

    Example:
        >>> soft_sort(torch.tensor([[3.0, 1.0, 2.0]]), regularization_strength=0.1)
        tensor([[1., 2., 3.]])
        >>> soft_sort(torch.tensor([[3.0, 1.0, 2.0]]), regularization_strength=10.0)
        tensor([[1.9000, 2.0000, 2.1000]])

    References:
        Blondel, Teboul, Berthet, Djolonga. "Fast Differentiable Sorting and Ranking", ICML 2020.
    """
    eps = _validate("soft_sort", x, regularization, regularization_strength)
    if x.shape[-1] == 0:  # empty rows: nothing to order (and no row length to reshape by)
        return x.clone()
    return _SoftSortFn.apply(_widen(x), regularization, eps)[0].to(x.dtype)


class _SoftOrderModule(nn.Module):
    _fn = staticmethod(soft_rank)

    def __init__(self, regularization: str = "l2", regularization_strength: float = 1.0):
        super().__init__()
        name = type(self).__name__
        check_choice(name, "regularization", regularization, _REGULARIZATIONS)
        self.regularization = regularization
        self.regularization_strength = check_positive(
            name, "regularization_strength", regularization_strength)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._fn(x, self.regularization, self.regularization_strength)

    def extra_repr(self) -> str:
        return (f"regularization={self.regularization!r}, "
                f"regularization_strength={self.regularization_strength}")


class SoftRank(_SoftOrderModule):
    """Module form of :func:`soft_rank`.

    Example:
        >>> SoftRank(regularization_strength=0.5)
        SoftRank(regularization='l2', regularization_strength=0.5)
    """

    _fn = staticmethod(soft_rank)


class SoftSort(_SoftOrderModule):
    """Module form of :func:`soft_sort`.

    Example:
        >>> SoftSort("kl")
        SoftSort(regularization='kl', regularization_strength=1.0)
    """

    _fn = staticmethod(soft_sort)
