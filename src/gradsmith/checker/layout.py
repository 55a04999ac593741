"""Check a Function on the layout it is written for when a parameter's shape was a guess.

Zero-configuration inputs guess each parameter's shape. A per-feature ``bias`` made the input's
full shape gets a 1-D gradient from a backward that is right for its contract (``g.sum(0)``):
autograd rejects it, and the check used to FAIL a correct Function with
``grad-shape-mismatch``. :func:`on_own_layout` re-checks such an input set with each
parameter whose gradient backward reduced (fewer elements) shaped as that gradient: what that check finds (a PASS, or a real
``gradient-mismatch`` such as a mean instead of a sum) replaces the set's report, and a
warning, ``assumed-shape``, names the shape the Function was checked at and the one it rejects.
Registered examples are the user's shapes: this applies to synthesised inputs only.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from gradsmith.checker.report import Finding, Report

# A re-check that ends in one of these did not run on the new layout: keep the first report.
_NOT_RUN = {"grad-shape-mismatch", "forward-error", "backward-error", "wrong-grad-count",
            "non-tensor-grad"}


def on_own_layout(args: tuple, names: list[str], report: Report,
                  run: Callable[[tuple], Report], known: frozenset[str] = frozenset()
                  ) -> tuple[tuple, Report, dict[str, tuple[int, ...]]]:
    """The set's arguments and report, re-checked on the layout backward's gradients show.

    Args:
        args: the input set (synthesised).
        names: forward's positional parameter names, in order.
        report: the set's report.
        run: checks the Function on an argument tuple.
        known: parameters whose layout an earlier set showed (the first set's reduction): in
            a further set (a size-1 dimension) their gradient's shape is the layout too.

    Returns:
        ``(args, report, reshaped)``: unchanged with ``reshaped == {}`` when no parameter's
        gradient was reduced or the re-check did not run; else the new arguments, the
        re-check's report (with an ``assumed-shape`` warning per parameter) and each
        reshaped parameter's new shape.
    """
    import torch

    # Only a reduction (fewer elements: bias given (3, 4), gradient (4,)) says what layout the
    # code is written for; a size-1 dimension squeezed away ((1, 4) -> (4,)) is a bug.
    shapes = {f.input: tuple(f.details["got"]) for f in report.findings
              if f.code == "grad-shape-mismatch" and f.is_error and "got" in f.details
              and (f.input in known or
                   math.prod(f.details["got"]) < math.prod(f.details.get("expected", ())))}
    if not shapes or not set(shapes) <= set(names):
        return args, report, {}
    fresh = list(args)
    for label, shape in shapes.items():
        i = names.index(label)
        old = args[i] if i < len(args) else None
        if not isinstance(old, torch.Tensor) or not old.is_floating_point():
            return args, report, {}
        generator = torch.Generator().manual_seed(1000 + i)
        value = torch.randn(shape, dtype=torch.float64, generator=generator)
        fresh[i] = value.to(old.dtype).to(old.device).requires_grad_(old.requires_grad)
    try:
        other = run(tuple(fresh))
    except Exception:  # noqa: BLE001 - the first report stands, with its findings
        return args, report, {}
    if other.codes("error") & _NOT_RUN:
        return args, report, {}
    for label, shape in shapes.items():
        other.findings.append(_assumed(label, shape, tuple(args[names.index(label)].shape)))
    other.sort()
    return tuple(fresh), other, shapes


def _assumed(label: str, shape: tuple[int, ...], given: tuple[int, ...]) -> Finding:
    return Finding(
        "assumed-shape", "warning",
        f"{label} was checked with shape {shape}, the shape of the gradient backward returns "
        f"for it: the Function is written for that layout. Given {label} of shape {given} "
        f"(a guess, as no example is registered), backward's {shape} gradient is rejected by "
        "autograd: a shape error at run time for anyone who passes that shape",
        f"if {label} may take other shapes, reduce its gradient to its shape "
        f"(`grad.sum_to_size({label}.shape)`); else register an example with {label} of shape "
        f"{shape} (@gradsmith.example) so that the check does not have to guess",
        "structure", label, {"checked": list(shape), "given": list(given)})
