"""Surrogate terms for a straight-through lookup: forward returns rows of a table picked by
indices it also returns (VQ-VAE's vector quantization: ``(codebook[indices], indices)``).

The input that picks the rows gets the incoming gradient unchanged (straight-through), the
table the exact gradient of the row selection. No element-wise term gives both, and the
Function's own backward cannot be reused for the table (the declaration would be checked
against itself), so the term selects the rows again with autograd, at indices from the
Function on detached arguments: ``x - x.detach() + table[Fn.apply(x.detach(),
table.detach())[k]].view_as(x)`` (ParallelWaveGAN's VectorQuantizationStraightThrough,
corpus 5 dev, printed a template). Checked against backward like every other term.
"""

from __future__ import annotations

import torch

from gradsmith.checker.inputs import flatten_outputs
from gradsmith.checker.session import Session


def terms(session: Session, names: list[str], top: int) -> list[str]:
    """Candidate terms for forward argument ``top`` (the one that picks the rows)."""
    cls = session.function_cls
    subject = session.subject
    if cls is None or cls.__qualname__ != cls.__name__:
        return []
    try:
        flat = flatten_outputs(subject.call(subject.base()))
    except Exception:  # noqa: BLE001 - user code; the gradients check ran it already
        return []
    picks = [k for k, o in enumerate(flat)
             if isinstance(o, torch.Tensor) and not o.is_floating_point()
             and not o.is_complex() and o.dtype != torch.bool]
    if len(flat) < 2 or not picks:
        return []
    values = subject.args.values
    x = names[top]
    detached = ", ".join(f"{n}.detach()" if isinstance(values[i], torch.Tensor) else n
                         for i, n in enumerate(names))
    return [f"{x} - {x}.detach() + {names[i]}[{cls.__name__}.apply({detached})[{k}]]"
            f".view_as({x})"
            for i, table in enumerate(values) if i != top and isinstance(table, torch.Tensor)
            and table.is_floating_point() and table.dim() == 2 for k in picks]
