"""Point 11: tensors kept as ctx attributes, a ctx that outlives its outputs, gradients for
inputs that do not need them; the bytes saved for backward are measured."""

from __future__ import annotations

import gc
import weakref

import torch

from gradsmith.checker import structure
from gradsmith.checker.inputs import flatten_outputs
from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session, Skip
from gradsmith.checker.tensors import address, close

NAME = "hygiene"


def run(session: Session) -> list[Finding]:
    if session.function_cls is None:
        raise Skip("ctx hygiene applies to torch.autograd.Function targets")
    findings = _ctx_findings(session)
    findings += _unneeded(session)
    return findings


def _ctx_findings(session: Session) -> list[Finding]:
    subject = session.subject
    saved: dict[tuple, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved[(address(t), tuple(t.shape), t.dtype)] = t.numel() * t.element_size()
        return t

    values = [x.requires_grad_(True).clone() for x in subject.args.working_copies(None)]
    args = subject.build(values, user_dtype=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = subject.run_built(args)
    flat = [o for o in flatten_outputs(out) if o is not None]
    node = next((o.grad_fn for o in flat if o.grad_fn is not None), None)
    if node is None or not hasattr(node, "_forward_cls"):
        raise Skip("the output has no custom Function node to inspect")
    on_ctx = {k: v for k, v in getattr(node, "__dict__", {}).items() if _holds_tensor(v)}
    session.report.saved_bytes = sum(saved.values()) + sum(
        _nbytes(v) for v in on_ctx.values())
    findings = [Finding(
        "tensor-on-ctx", "warning",
        f"forward stores tensor(s) as ctx.{name} instead of ctx.save_for_backward: no "
        "in-place modification check, no saved-tensor hooks (offloading, checkpointing), and "
        "a reference cycle when the tensor is an output",
        f"use ctx.save_for_backward(...) for ctx.{name} and read it back from "
        "ctx.saved_tensors; keep only non-tensors (shapes, flags) as attributes", NAME,
        details={"attribute": name, "bytes": _nbytes(value)})
        for name, value in on_ctx.items()]
    del node, out, flat, args, values, on_ctx
    if _leaks(session):
        findings.append(Finding(
            "ctx-leak", "warning",
            "the ctx (and everything saved on it) is still alive after all outputs were "
            "deleted and garbage collected: memory grows with every call",
            "do not keep ctx (or outputs) in globals, closures, caches or on the Function "
            "class; store outputs with ctx.save_for_backward, not as ctx attributes", NAME))
    return findings


def _leaks(session: Session) -> bool:
    """Forward without saved-tensor hooks (they would themselves hold the outputs), drop
    every reference, collect, and see whether the ctx survived."""
    subject = session.subject
    values = [x.requires_grad_(True).clone() for x in subject.args.working_copies(None)]
    out = subject.run_built(subject.build(values, user_dtype=True))
    node = next((o.grad_fn for o in flatten_outputs(out) if o is not None
                 and o.grad_fn is not None), None)
    ref = weakref.ref(node)
    del node, out, values
    # Cheap first: plain refcounting frees a healthy ctx; a full collection (slow with a
    # large heap) only runs when something is still holding on.
    for generation in (None, 1, 2):
        if ref() is None:
            return False
        if generation is not None:
            gc.collect(generation)
    return ref() is not None


def _unneeded(session: Session) -> list[Finding]:
    """Gradients for inputs that need none: the user's frozen inputs (floating tensors passed
    without requires_grad while others have it: a frozen weight) as given, then each
    differentiated input switched off in turn. A computed gradient is a warning; another
    input's gradient changing is an error (typically a wrong ``ctx.needs_input_grad`` index)."""
    args = session.subject.args
    k = len(args.inputs)
    frozen = [(args.labels[i], args.top_index[i]) for i in args.constant_pos
              if _only_top_level(args, args.top_index[i])]
    if k < 2 and not frozen:
        return []
    try:
        _, full, grad_outputs = structure.raw_backward(session, user_dtype=True)
    except Exception:  # noqa: BLE001 - reported by the structure check
        return []
    findings = [_unneeded_finding(label, pos, frozen=True) for label, pos in frozen
                if pos < len(full) and full[pos] is not None
                and not _free(full, pos, grad_outputs)]
    if k < 2:
        return findings
    labels = args.diff_labels
    positions = [args.position(t) for t in range(k)]
    for i in range(k):
        needs = [j != i for j in range(k)]
        try:
            _, raw, grad_outputs = structure.raw_backward(session, user_dtype=True, needs=needs)
        except Skip:
            continue  # nothing else reaches the Function's node (e.g. only module parameters)
        except Exception as exc:  # noqa: BLE001
            findings.append(_crashes_when_frozen(labels[i], exc))
            continue
        pos = positions[i]
        if pos is not None and pos < len(raw) and raw[pos] is not None and not _free(
                raw, pos, grad_outputs):
            findings.append(_unneeded_finding(labels[i], pos, frozen=False))
        for j, other in enumerate(positions):
            if j == i or other is None or other >= min(len(raw), len(full)):
                continue
            want, got = full[other], raw[other]
            if isinstance(want, torch.Tensor) and not (
                    isinstance(got, torch.Tensor) and close(got, want, 1e-7, 1e-9)):
                what = "None" if got is None else "a different gradient"
                findings.append(_needs_mismatch(labels[i], labels[j], f"backward returns {what}"
                                                f" for {labels[j]}"))
    return findings


def _unneeded_finding(label: str, pos: int, frozen: bool) -> Finding:
    how = ("it was passed without requires_grad (frozen) while other inputs require grad"
           if frozen else "it does not require grad")
    # info: the gradient is right and autograd drops it; only time is lost (not shown by
    # default, so it does not drown the findings that matter)
    return Finding(
        "unneeded-grad", "info",
        f"backward computes a gradient for {label} although {how}: ctx.needs_input_grad[{pos}]"
        " is False, the work is wasted and autograd discards the result",
        f"guard the computation with `if ctx.needs_input_grad[{pos}]:` and return None "
        "otherwise", NAME, label, {"frozen": frozen})


def _crashes_when_frozen(off: str, exc: BaseException) -> Finding:
    finding = getattr(exc, "finding", None)
    text = finding.message if finding is not None else f"{type(exc).__name__}: {exc}"
    return Finding(
        "needs-input-grad-mismatch", "error",
        f"when {off} does not require grad (a frozen weight, a constant), {text}: training "
        "with that input frozen crashes",
        "make backward work with frozen inputs: compute only the gradients "
        "ctx.needs_input_grad asks for, and give torch.autograd.grad only tensors that "
        "require grad (or allow_unused=True and None for the rest)", NAME, off,
        {"exception": type(getattr(exc, "exc", None) or exc).__name__})


def _needs_mismatch(off: str, victim: str | None, what: str) -> Finding:
    return Finding(
        "needs-input-grad-mismatch", "error",
        f"when {off} does not require grad, {what} (compared with all inputs requiring grad): "
        "the gradient users get depends on which other inputs are trainable",
        "check the ctx.needs_input_grad index used for each gradient (position i guards the "
        "gradient returned at position i) and that skipped branches do not feed other grads",
        NAME, victim or off)


def _free(raw: tuple, pos: int, grad_outputs: tuple) -> bool:
    """The unneeded gradient cost nothing: it is grad_output itself or another returned
    gradient (``return g, g``)."""
    g = raw[pos]
    if not isinstance(g, torch.Tensor):
        return False
    others = [t for k, t in enumerate(raw) if k != pos and isinstance(t, torch.Tensor)]
    others += [t for t in grad_outputs if isinstance(t, torch.Tensor)]
    return any(address(g) == address(t) and g.shape == t.shape for t in others)


def _only_top_level(args, pos: int) -> bool:
    return sum(1 for i in args.tensor_pos if args.top_index[i] == pos) == 1


def _holds_tensor(value) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, (list, tuple)):
        return any(isinstance(v, torch.Tensor) for v in value)
    if isinstance(value, dict):
        return any(isinstance(v, torch.Tensor) for v in value.values())
    return False


def _nbytes(value) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (list, tuple)):
        return sum(_nbytes(v) for v in value)
    if isinstance(value, dict):
        return sum(_nbytes(v) for v in value.values())
    return 0
