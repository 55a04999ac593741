"""Check a Function on the layout it is written for when a parameter's shape was a guess.

Zero-configuration inputs guess each parameter's shape. A per-feature ``bias`` made the input's
full shape gets a 1-D gradient from a backward that is right for its contract (``g.sum(0)``):
autograd rejects it, and the check used to FAIL a correct Function with
``grad-shape-mismatch``. :func:`on_own_layout` re-checks such an input set with each mismatched
parameter shaped as backward's gradient: what that check finds (a PASS, or a real
``gradient-mismatch`` such as a mean instead of a sum) replaces the set's report, and a
warning, ``assumed-shape``, names the shape the Function was checked at and the one it rejects.
Registered examples are the user's shapes: this applies to synthesised inputs only.
"""

from __future__ import annotations

from collections.abc import Callable

from gradsmith.checker.report import Finding, Report

# A re-check that ends in one of these did not run on the new layout: keep the first report.
_NOT_RUN = {"grad-shape-mismatch", "forward-error", "backward-error", "wrong-grad-count",
            "non-tensor-grad"}


def on_own_layout(args: tuple, names: list[str], report: Report,
                  run: Callable[[tuple], Report]) -> tuple[tuple, Report, str]:
    """The set's arguments and report, re-checked on the layout backward's gradients show.

    Args:
        args: the input set (synthesised).
        names: forward's positional parameter names, in order.
        report: the set's report.
        run: checks the Function on an argument tuple.

    Returns:
        ``(args, report, change)``: unchanged with ``change == ""`` when no parameter's
        gradient had another shape or the re-check did not run; else the new arguments, the
        re-check's report (with an ``assumed-shape`` warning per parameter) and what changed
        (``"bias (4,)"``).
    """
    import torch

    shapes = {f.input: tuple(f.details["got"]) for f in report.findings
              if f.code == "grad-shape-mismatch" and f.is_error and "got" in f.details}
    if not shapes or not set(shapes) <= set(names):
        return args, report, ""
    fresh = list(args)
    for label, shape in shapes.items():
        i = names.index(label)
        old = args[i] if i < len(args) else None
        if not isinstance(old, torch.Tensor) or not old.is_floating_point():
            return args, report, ""
        generator = torch.Generator().manual_seed(1000 + i)
        value = torch.randn(shape, dtype=torch.float64, generator=generator)
        fresh[i] = value.to(old.dtype).to(old.device).requires_grad_(old.requires_grad)
    try:
        other = run(tuple(fresh))
    except Exception:  # noqa: BLE001 - the first report stands, with its findings
        return args, report, ""
    if other.codes("error") & _NOT_RUN:
        return args, report, ""
    for label, shape in shapes.items():
        other.findings.append(_assumed(label, shape, tuple(args[names.index(label)].shape)))
    other.sort()
    return tuple(fresh), other, ", ".join(f"{n} {s}" for n, s in shapes.items())


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
