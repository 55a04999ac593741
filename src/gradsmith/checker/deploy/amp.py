"""``autocast``: the Function in a mixed-precision training step.

The step follows PyTorch's AMP recipe: float32 inputs, forward under
``torch.autocast(device, dtype)``, backward *outside* it. Autocast casts the inputs of matmuls,
convolutions and friends inside forward, so a Function's forward may return bfloat16 while it
saved float32 tensors; its backward then runs without autocast and mixes the two (``expected
m1 and m2 to have the same dtype``). ``@torch.amp.custom_fwd``/``custom_bwd`` make backward run
under forward's autocast state; when one fails, the check tries the Function again with them
applied and says whether they fix it.

CPU ``bfloat16`` always; CUDA ``float16`` too when a GPU is present (the inputs are moved there;
a Function that cannot run on CUDA at all is reported as info).
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from gradsmith.checker.deploy._common import (
    Evaluation,
    comparable_only,
    evaluate,
    first_line,
    leaves,
    mismatches,
    user_frame_of,
)
from gradsmith.checker.inputs import overrides
from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session, Skip

NAME = "autocast"
#: Relative (normwise) tolerance against float32: JAX's check_grads gradient tolerances
#: (``default_gradient_tolerance``), the same table as the precision check's.
TOLERANCE = {torch.bfloat16: 1e-1, torch.float16: 1e-2}


def modes() -> list[tuple[str, torch.dtype]]:
    """``(device, dtype)`` pairs to check on this machine (the inputs are moved there)."""
    found = [("cpu", torch.bfloat16)]
    if torch.cuda.is_available():
        found.append(("cuda", torch.float16))
    return found


def run(session: Session) -> list[Finding]:
    return comparable_only(session, _run(session), NAME)


def _run(session: Session) -> list[Finding]:
    try:
        want32 = evaluate(session, dtype=torch.float32)
    except Exception as exc:  # noqa: BLE001
        raise Skip(f"the Function does not run in float32 ({first_line(exc)}): autocast "
                   "starts from float32") from None
    findings: list[Finding] = []
    for device, dtype in modes():
        findings += _one(session, device, dtype, want32)
    return findings


def _one(session: Session, device: str, dtype: torch.dtype,
         want32: Evaluation) -> list[Finding]:
    label = f"{device} {str(dtype).removeprefix('torch.')} autocast"
    base = session.subject.base()
    here = base[0].device.type if base else "cpu"
    if device != here:  # the float32 reference on that device, and whether it runs there
        try:
            want32 = _evaluate(session, session.subject.target.call, device, None)
        except Exception as exc:  # noqa: BLE001 - not an autocast problem
            return [Finding("autocast-unsupported-device", "info",
                            f"{label} not checked: the Function does not run on {device} in "
                            f"float32 ({first_line(exc)})", "", NAME)]
    try:
        got = _evaluate(session, session.subject.target.call, device, dtype)
    except _Stage as failure:
        return [_failure(session, label, device, dtype, failure)]
    findings = _dtype_findings(session, got, label)
    bad = mismatches(session, _as32(got), _as32(want32), TOLERANCE[dtype])
    if bad:
        from gradsmith.checker.deploy._common import describe

        findings.append(Finding(
            "autocast-inaccurate", "warning",
            f"under {label} the results are far from float32: {describe(bad)} (tolerance "
            f"{TOLERANCE[dtype]:g}, normwise)",
            "keep precision-sensitive parts in float32: decorate forward with "
            "@torch.amp.custom_fwd(device_type=..., cast_inputs=torch.float32), or compute "
            "reductions and exponentials on x.float()", NAME, bad[0][1],
            details={"mismatches": [list(b) for b in bad], "device": device,
                     "dtype": str(dtype)}))
    return findings


class _Stage(Exception):  # noqa: N818 - carries which half of the step failed
    def __init__(self, stage: str, exc: BaseException) -> None:
        super().__init__(str(exc))
        self.stage, self.exc = stage, exc


def _evaluate(session: Session, call: Any, device: str, dtype: torch.dtype | None) -> Evaluation:
    """Forward under autocast (``dtype`` None: no autocast), backward outside it, float32
    inputs on ``device``; raises :class:`_Stage` saying which half failed."""
    xs = [x.detach().to(device=device).requires_grad_(True)
          for x in leaves(session, torch.float32)]
    enabled = dtype is not None

    def forward(*args: Any) -> Any:
        args = _to_device(args, device)
        try:
            with torch.autocast(device, dtype=dtype or torch.bfloat16, enabled=enabled):
                return call(*args)
        except Exception as exc:
            raise _Stage("forward", exc) from exc

    def backward(thunk: Any) -> Any:
        try:
            return thunk()
        except Exception as exc:
            raise _Stage("backward", exc) from exc

    return evaluate(session, forward, torch.float32, xs=xs, backward=backward)


def _to_device(args: Any, device: str) -> Any:
    """Every tensor (and module argument) on ``device``; a no-op for those already there."""
    from torch.utils._pytree import tree_map

    def move(a: Any) -> Any:
        if isinstance(a, torch.Tensor):
            return a.to(device)
        if isinstance(a, torch.nn.Module) and any(p.device.type != device
                                                  for p in a.parameters()):
            return copy.deepcopy(a).to(device)
        return a

    return tree_map(move, args)


def _as32(ev: Evaluation) -> Evaluation:
    return Evaluation([o.float().cpu() for o in ev.outs], [g.float().cpu() for g in ev.grads])


def _dtype_findings(session: Session, got: Evaluation, label: str) -> list[Finding]:
    bad = [lb for lb, g in zip(session.subject.labels, got.grads) if g.dtype != torch.float32]
    if not bad:
        return []
    return [Finding(
        "autocast-grad-dtype", "error",
        f"under {label} the gradient of {', '.join(bad)} is not float32 like its input",
        "return gradients in each input's dtype (grad.to(x.dtype))", NAME, bad[0])]


def _failure(session: Session, label: str, device: str, dtype: torch.dtype,
             failure: _Stage) -> Finding:
    exc = failure.exc
    where = user_frame_of(exc)
    at = f" at {where[0]}:{where[1]}" if where else ""
    fixed = _custom_amp_fixes(session, device, dtype)
    if fixed is not None:
        hint = (f"decorate {fixed} (verified: with them the same step runs and its results "
                "are within tolerance of float32)")
    elif failure.stage == "backward":
        hint = ("forward ran in reduced precision but backward mixes dtypes: decorate forward "
                "(setup_context for forward(*args)-style Functions) with "
                "@torch.amp.custom_fwd(device_type=...) and backward with "
                "@torch.amp.custom_bwd(device_type=...), or cast in backward "
                "(grad.to(saved.dtype))")
    else:
        hint = ("make forward accept reduced-precision tensors (no hard-coded dtypes), or "
                "decorate it with @torch.amp.custom_fwd(device_type=..., "
                "cast_inputs=torch.float32) to run it in float32")
    return Finding(
        "autocast-error", "warning",
        f"under {label} the {failure.stage} raised {first_line(exc)}{at} (the AMP recipe: "
        "forward under autocast, backward outside it)", hint, NAME,
        details={"stage": failure.stage, "exception": type(exc).__name__, "device": device,
                 "dtype": str(dtype), "custom_amp_fixes": fixed is not None})


def _custom_amp_fixes(session: Session, device: str, dtype: torch.dtype) -> str | None:
    """Re-run with custom_fwd/custom_bwd applied; the decoration to advise when it works."""
    cls = session.function_cls
    if cls is None or not overrides(cls, "backward"):
        return None
    modern = overrides(cls, "setup_context")
    fwd = "setup_context" if modern else "forward"
    patched = type(cls.__name__, (cls,), {
        fwd: staticmethod(torch.amp.custom_fwd(getattr(cls, fwd), device_type=device)),
        "backward": staticmethod(torch.amp.custom_bwd(cls.backward, device_type=device)),
    })
    try:
        want32 = _evaluate(session, patched.apply, device, None)
        got = _evaluate(session, patched.apply, device, dtype)
    except Exception:  # noqa: BLE001 - the decorators do not fix it
        return None
    if mismatches(session, _as32(got), _as32(want32), TOLERANCE[dtype]):
        return None
    return (f"{fwd} with @torch.amp.custom_fwd(device_type={device!r}) and backward with "
            f"@torch.amp.custom_bwd(device_type={device!r})")
