"""Check a Function that takes sparse tensors on their stored values (private).

A sparse operand (COO, CSR, CSC, BSR, BSC) has no strides and no single buffer, and the
checks (finite differences, dtype probes, non-contiguous variants) are written for strided
tensors: ``gradsmith.check(Fn, A.to_sparse_csc())`` raised "unsupported tensor layout:
SparseCsc" and a Function written for such operands could not be checked (corpus 13a's dQP
``sparse_row_norm``). What a caller can change in a sparse tensor is its stored values, at
fixed positions; :func:`on_values` therefore checks the Function on those: each argument in a
sparse layout becomes a strided leaf of its values, and every call rebuilds the sparse tensor,
in its own layout and pattern, from that leaf. Autograd carries backward's gradient to the
leaf: one in the operand's layout gives its values, a dense one (a Function may return dense
gradients for a sparse input) its entries at the stored positions, the only ones a
perturbation of the operand can reach. A sparse output of such a Function is read as its
dense tensor, so backward receives its gradient on the output's pattern. Strided arguments are untouched, so a Function without
sparse operands runs exactly as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from gradsmith.checker.inputs import Target

_COMPRESSED = {torch.sparse_csr: ("crow_indices", "col_indices"),
               torch.sparse_csc: ("ccol_indices", "row_indices"),
               torch.sparse_bsr: ("crow_indices", "col_indices"),
               torch.sparse_bsc: ("ccol_indices", "row_indices")}


def on_values(target: Target, args: tuple) -> tuple[Target, tuple]:
    """The target and arguments to check: sparse arguments replaced by their values.

    Example:
        >>> import torch
        >>> from gradsmith.checker.inputs import resolve_target
        >>> a = torch.eye(2, dtype=torch.float64).to_sparse_csr().requires_grad_()
        >>> t, (v,) = on_values(resolve_target(lambda m: m.to_dense().sum()), (a,))
        >>> v.tolist(), v.requires_grad, float(t.call(v).detach())
        ([1.0, 1.0], True, 2.0)
    """
    rebuilds: dict[int, Callable[[torch.Tensor], torch.Tensor]] = {}
    values = list(args)
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor) and a.layout != torch.strided:
            rebuilds[i], leaf = _split(a.detach())
            values[i] = leaf.requires_grad_(a.requires_grad)
    if not rebuilds:
        return target, args

    def passed(xs: tuple) -> tuple:
        return tuple(rebuilds[i](x) if i in rebuilds else x for i, x in enumerate(xs))

    def call(*xs: Any) -> Any:
        out = target.call(*passed(xs))
        return tuple(map(_dense, out)) if isinstance(out, tuple) else _dense(out)

    call.passed = passed  # type: ignore[attr-defined]
    return Target(call, target.function_cls, target.name), tuple(values)


def as_passed(target: Target, args: tuple) -> tuple:
    """The arguments forward receives for ``args`` (sparse operands rebuilt): what backward's
    gradients must match in shape, a sparse operand's dense shape rather than its values'."""
    return getattr(target.call, "passed", tuple)(args)


def _dense(out: Any) -> Any:
    """A sparse output as a dense tensor (differentiable: its gradient reaches backward on
    the output's own pattern); anything else as it is."""
    if isinstance(out, torch.Tensor) and out.layout != torch.strided:
        return out.to_dense()
    return out


def _split(a: torch.Tensor) -> tuple[Callable[[torch.Tensor], torch.Tensor], torch.Tensor]:
    """How to rebuild ``a`` from values, and a copy of its values."""
    if a.layout == torch.sparse_coo:
        a = a.coalesce()
        indices, size = a.indices(), a.shape
        return (lambda v: torch.sparse_coo_tensor(
            indices, v, size, is_coalesced=True, check_invariants=False),
                a.values().clone())
    compressed, plain = (getattr(a, name)() for name in _COMPRESSED[a.layout])
    layout, size = a.layout, a.shape
    return (lambda v: torch.sparse_compressed_tensor(compressed, plain, v, size, layout=layout,
                                                         check_invariants=False),
            a.values().clone())
