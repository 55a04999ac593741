"""``reference=``: outputs and every gradient judged against plain PyTorch of the same inputs.

Kernels compute in float32 (or lower) whatever they are handed, so no finite difference of them
is sharp, and gradcheck cannot judge them. A reference can: the same computation written in
plain PyTorch, differentiated by autograd. Run in float64 it is the truth; run in the precision
the Function computes in, its distance from that truth is the error an honest implementation
of that precision makes. The Function must land within a small multiple of it, so the user sets
no tolerance:

    tolerance = 8 x max|reference(own precision) - reference(float64)|
                + 32 x eps(own precision) x max|reference(float64)|

(the second term keeps a reference that happens to be exact in low precision, a copy or a
sum of few terms, from demanding bit-equality). "Own precision" is the lower of the Function's
input dtype and the precision it was found to compute in (``low-precision-numerics``).

With a reference the first-order gradients are judged here instead of by finite differences
(``gradients`` is skipped; it would only add its own noise); second order, forward-mode and
the other checks stay as they are.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from gradsmith.checker import tf32
from gradsmith.checker.inputs import flatten_outputs
from gradsmith.checker.problem import index_str, seeded_grad
from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session, Skip, backward_error, forward_error
from gradsmith.checker.subject import seeded

NAME = "reference"
_REF_FACTOR = 8.0
_EPS_FACTOR = 32.0
_LOW = (torch.bfloat16, torch.float16, torch.float32, torch.float64)


def run(session: Session) -> list[Finding]:
    reference = session.options.extra.get("reference")
    if reference is None:
        raise Skip("no reference= given")
    subject = session.subject
    own = own_dtype(session)
    base = [x.detach() for x in subject.base()]
    gen = session.generator(23)
    try:
        fn_outs, fn_grads, vs = _evaluate(session, base, None, gen)
    except _Failed as failed:
        return [failed.finding]
    try:
        exact = _evaluate(session, [x.to(torch.float64) for x in base], reference, vs,
                          torch.float64)
        with tf32.like_the_function(session):  # TF32 where the Function's products were
            rough = _evaluate(session, [x.to(own) for x in base], reference, vs, own)
    except _Failed as failed:
        return [failed.finding]
    findings: list[Finding] = []
    eps = torch.finfo(own).eps
    pairs = [(label, "output", i) for i, label in enumerate(subject.out_labels)]
    pairs += [(label, "gradient", t) for t, label in enumerate(subject.labels)]
    for label, kind, i in pairs:
        mine = (fn_outs if kind == "output" else fn_grads)[i]
        truth = (exact[0] if kind == "output" else exact[1])[i]
        low = (rough[0] if kind == "output" else rough[1])[i]
        if mine.shape != truth.shape:
            findings.append(_declaration(
                f"the reference's {kind} {label} has shape {tuple(truth.shape)}, the "
                f"Function's {tuple(mine.shape)}"))
            continue
        found = _compare(label, kind, mine, truth, low, eps, own)
        if found is not None:
            findings.append(found)
    session.cache["reference:judged"] = True
    return findings


def own_dtype(session: Session) -> torch.dtype:
    """The precision the Function computes in: its input dtype, or lower when detected."""
    dtypes = [x.dtype for x in session.subject.args.originals if x.is_floating_point()]
    given = max(dtypes or [torch.float64], key=lambda d: torch.finfo(d).eps)
    computed = next((d for d in _LOW if torch.finfo(d).eps == session.settings.eps),
                    torch.float64)
    return max((given, computed), key=lambda d: torch.finfo(d).eps)


class _Failed(Exception):  # noqa: N818 - carries the finding
    def __init__(self, finding: Finding) -> None:
        super().__init__(finding.message)
        self.finding = finding


def _evaluate(session: Session, values: list[torch.Tensor], reference: Callable | None,
              vs: Any, dtype: torch.dtype | None = None):
    """Outputs and ``J^T v`` of the Function (``reference`` None) or of the reference, on a
    graph of its own. For the Function, ``vs`` is the generator that draws the directions."""
    subject = session.subject
    leaves = [x.clone().requires_grad_(True) for x in values]
    try:
        if reference is None:
            out = subject.call([x.clone() for x in leaves])
        else:
            args = subject.args.build([x.clone() for x in leaves], dtype)
            out = seeded(subject.seed, reference, *args)
    except Exception as exc:  # noqa: BLE001 - user code
        if reference is None:
            raise _Failed(forward_error(exc, NAME, session.function_cls).finding) from None
        raise _Failed(_declaration(f"the reference raised {type(exc).__name__}: {exc}")) \
            from None
    if reference is None:
        session.cache["reference:outputs"] = len(flatten_outputs(out))
    outs = _select(subject, out, reference is not None, session.cache["reference:outputs"])
    if isinstance(vs, torch.Generator):
        vs = [torch.randn(o.shape, generator=vs, dtype=torch.float64) for o in outs]
    if len(outs) != len(vs):
        raise _Failed(_declaration(
            f"the reference returns {len(outs)} differentiable output(s), the Function "
            f"{len(vs)}"))
    used = [(o, v.to(o.dtype)) for o, v in zip(outs, vs) if o.requires_grad]
    grads: list[Any] = [None] * len(leaves)
    if used:
        try:
            grads = list(seeded_grad(subject.backward_seed if reference is None else None,
                                     [o for o, _ in used], leaves, [v for _, v in used],
                                     allow_unused=True))
        except Exception as exc:  # noqa: BLE001 - user code
            if reference is None:
                raise _Failed(backward_error(exc, NAME, session.function_cls).finding) \
                    from None
            raise _Failed(_declaration(f"autograd of the reference raised "
                                       f"{type(exc).__name__}: {exc}")) from None
    grads = [torch.zeros_like(x) if g is None else g.detach() for g, x in zip(grads, leaves)]
    return [o.detach() for o in outs], grads, vs


def _select(subject: Any, out: Any, is_reference: bool, count: int) -> list[torch.Tensor]:
    if not is_reference:
        return subject.select(out)
    flat = flatten_outputs(out)
    if len(flat) != count:
        raise _Failed(_declaration(
            f"the reference returns {len(flat)} output(s), the Function {count}"))
    picked = [flat[i] for i in subject.out_pos]
    if not all(isinstance(o, torch.Tensor) and o.is_floating_point() for o in picked):
        raise _Failed(_declaration(
            "the reference's outputs at the Function's differentiable positions are not all "
            "floating-point tensors"))
    return picked


def _compare(label: str, kind: str, mine: torch.Tensor, truth: torch.Tensor,
             low: torch.Tensor, eps: float, own: torch.dtype) -> Finding | None:
    a, b, c = (t.to(torch.float64) for t in (mine, truth, low))
    ref_error = float((c - b).abs().nan_to_num(0.0).max()) if b.numel() else 0.0
    scale = float(b.abs().nan_to_num(0.0).max()) if b.numel() else 0.0
    tol = _REF_FACTOR * ref_error + _EPS_FACTOR * eps * scale
    bad = ((a - b).abs() > tol) | (a.isnan() != b.isnan())
    if not bool(bad.any()):
        return None
    idx = torch.nonzero(bad.reshape(-1)).reshape(-1)
    j = int(idx[0])
    worst = int(((a - b).abs().nan_to_num(float("inf")).reshape(-1)).argmax())
    own_name = str(own).removeprefix("torch.")
    where = f"{label}{index_str(worst, a.shape)}"
    what = "output" if kind == "output" else "gradient of"
    return Finding(
        "reference-mismatch", "error",
        f"{what} {label} differs from the reference's at {len(idx)} of {a.numel()} elements "
        f"(first {label}{index_str(j, a.shape)}); worst {where}: Function "
        f"{float(a.reshape(-1)[worst]):.6g}, reference {float(b.reshape(-1)[worst]):.6g} "
        f"(float64); tolerance {tol:.2g} = {_REF_FACTOR:g}x the reference's own {own_name} "
        f"error ({ref_error:.2g}) + {_EPS_FACTOR:g} eps x its scale"
        + ("" if kind == "output" else " (projected on a random grad_output)"),
        "fix the Function's " + ("forward" if kind == "output" else "backward")
        + f" for {label} (or the reference, if it is the one that is wrong): a correct "
        f"implementation in {own_name} stays within a few times the reference's own "
        f"{own_name} error", NAME, None if kind == "output" else label,
        {"elements": idx[:20].tolist(), "tolerance": tol, "reference_error": ref_error,
         "computes_in": own_name, "kind": kind})


def _declaration(text: str) -> Finding:
    return Finding(
        "reference-error", "error", f"reference= cannot be compared: {text}",
        "give a plain-PyTorch function with the Function's signature, returning its outputs "
        "in the same order (differentiable by autograd)", NAME)
