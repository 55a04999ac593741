"""A further input set's backward shape error at a size the code fixes (private).

The "other shapes" and "size-1 dimension" sets change sizes the first set chose. A backward
that views a tensor to a literal size (``q.view(-1, 4, 1)``: a quaternion) raises on any other
size, while forward accepted it silently: a warning, ``fixed-size``, not a ``backward-error``,
when the view leaves the other sizes free (a ``-1``) and the size the error names is one the
first set had where this set changed it. A view to a whole literal shape (``g.reshape(3, 4)``)
hard-codes the batch: that stays a backward-error. The first
set ran at that size, and its findings stand. Tensors are read by their shapes only.
"""

from __future__ import annotations

import re
from typing import Any

from gradsmith.checker.report import Finding

_INVALID = re.compile(r"shape '\[([-\d, ]+)\]' is invalid for input of size \d+")


def fixed_size(report: Any, first: tuple, other: tuple) -> None:
    """Turn ``report``'s backward-error at a fixed size (see the module) into a warning."""
    changed = _changed_sizes(first, other)
    for i, f in enumerate(report.findings):
        match = _INVALID.search(f.message) if f.code == "backward-error" else None
        shape = [int(n) for n in match.group(1).split(",")] if match else []
        # view(-1, 4, 1): the rows free, one size fixed; view(3, 4) hard-codes the batch (a bug)
        sizes = {n for n in shape if n > 1} if -1 in shape else set()
        if sizes & changed:
            report.findings[i] = _warning(f, sorted(sizes & changed))


def _changed_sizes(first: tuple, other: tuple) -> set[int]:
    """The first set's sizes in the dimensions where ``other`` has another size."""
    out: set[int] = set()
    for a, b in zip(first, other):
        sa, sb = getattr(a, "shape", None), getattr(b, "shape", None)
        if sa is not None and sb is not None and len(sa) == len(sb):
            out |= {x for x, y in zip(sa, sb) if x != y}
    return out


def _warning(f: Finding, sizes: list[int]) -> Finding:
    said = ", ".join(map(str, sizes))
    return Finding(
        "fixed-size", "warning",
        f"backward is written for a fixed size {said} (the first input set's, where this one "
        f"has another) and raised on the other size, which forward accepted silently: {f.message}",
        "reject other sizes in forward (`if x.shape[-1] != 4: raise ValueError(...)`) so the "
        "caller's own call fails, or register an example (@gradsmith.example) at the size the "
        "code is written for", f.check, f.input, dict(f.details, sizes=sizes))
