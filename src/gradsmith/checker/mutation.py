"""Point 4: forward must not modify its inputs (unless ``ctx.mark_dirty``); backward must not
modify ``grad_output``, saved tensors or inputs.

Detected by value snapshots and version counters around each pass; saved tensors are observed
through ``torch.autograd.graph.saved_tensors_hooks`` and ``mark_dirty`` calls by wrapping
``FunctionCtx.mark_dirty`` for the duration of the forward.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch.autograd.function import FunctionCtx
from torch.utils._pytree import tree_flatten

from gradsmith.checker.float32_aliases import computes_in_float32, float32_backward_mutations
from gradsmith.checker.inputs import is_once_differentiable
from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session, backward_error, forward_error
from gradsmith.checker.tensors import address, same_values

NAME = "mutation"


@contextmanager
def recording_mark_dirty() -> Iterator[set[int]]:
    """Collect ``id()`` of every tensor passed to ``ctx.mark_dirty`` inside the block."""
    marked: set[int] = set()
    original = FunctionCtx.mark_dirty

    def mark_dirty(self, *tensors):
        marked.update(id(t) for t in tensors)
        return original(self, *tensors)

    FunctionCtx.mark_dirty = mark_dirty
    try:
        yield marked
    finally:
        FunctionCtx.mark_dirty = original


class Snapshot:
    """Values and version counters of tensors, to tell later whether they changed."""

    def __init__(self, tensors: list[torch.Tensor]):
        self.tensors = tensors
        self.values = [t.detach().clone() for t in tensors]
        self.versions = [t._version for t in tensors]

    def changed(self) -> list[int]:
        return [i for i, (t, v, ver) in enumerate(zip(self.tensors, self.values, self.versions))
                if t._version != ver or not _same(t.detach(), v)]


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return same_values(a, b)


def run(session: Session) -> list[Finding]:
    subject = session.subject
    values = [x.requires_grad_(True).clone() for x in subject.base()]
    args = subject.build(values)
    tensors, _ = tree_flatten(args)
    tensors = [t for t in tensors if isinstance(t, torch.Tensor)]
    labels = [subject.args.labels[i] for i in subject.args.tensor_pos]
    before = Snapshot(tensors)
    diff_ids = {id(tensors[subject.args.tensor_pos.index(p)]) for p in subject.args.diff_pos}
    saved: list[tuple[torch.Tensor, torch.Tensor]] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append((t, t.detach().clone()))
        return t

    try:
        with recording_mark_dirty() as marked, torch.autograd.graph.saved_tensors_hooks(
                pack, lambda t: t):
            out = subject.run_built(args)
    except Exception as exc:  # noqa: BLE001
        raise forward_error(exc, NAME, session.function_cls) from None
    findings = []
    for i in before.changed():
        t = tensors[i]
        if id(t) in marked:
            continue
        differentiable = id(t) in diff_ids
        findings.append(Finding(
            "input-mutated", "error" if differentiable else "warning",
            f"forward modified its input {labels[i]} in place without ctx.mark_dirty"
            + ("" if differentiable else " (a tensor that needs no gradient, e.g. a buffer)"),
            "work on a copy (x = x.clone()) or use out-of-place ops; if the in-place update "
            "is intended, call ctx.mark_dirty(x) and return x", NAME, labels[i]))
    in_forward = _saved_then_modified(saved, tensors, marked)
    if in_forward:
        findings.append(_saved_in_forward(in_forward[0]))
    findings += _backward(session, out, values, labels, tensors, saved,
                          {id(t) for t in in_forward})
    if not any(f.code == "input-mutated-in-backward" for f in findings) and \
            computes_in_float32(subject.select(out), values):  # .float() aliases float32 only
        findings += float32_backward_mutations(subject, labels)
    return findings


def _saved_then_modified(saved, tensors, marked) -> list[torch.Tensor]:
    """Tensors modified in place after an op saved them, still inside forward (``y =
    x.exp(); y += 1``): autograd raises "modified by an inplace operation" at backward."""
    known = {address(x) for x in tensors}  # inputs are reported as input-mutated
    snap = Snapshot([t for t, _ in saved])
    snap.values = [v for _, v in saved]
    changed = [snap.tensors[i] for i in snap.changed()]
    return [t for t in changed if id(t) not in marked and address(t) not in known]


def _saved_in_forward(t: torch.Tensor) -> Finding:
    return Finding(
        "saved-tensor-mutated", "error",
        f"forward modified in place a tensor that was already saved for backward (shape "
        f"{tuple(t.shape)}; e.g. `y = x.exp(); y += 1`): backward then raises 'one of the "
        "variables needed for gradient computation has been modified by an inplace "
        "operation', or, under saved-tensor hooks, computes with the modified values",
        "use the out-of-place form (`y = y + 1`) or modify a clone; an op's saved result "
        "must stay as it was", NAME)


def _backward(session, out, values, labels, tensors, saved, reported) -> list[Finding]:
    subject = session.subject
    outs = subject.select(out)
    gen = session.generator(3)
    grads = [torch.randn(o.shape, generator=gen, dtype=torch.float64).to(o.dtype) for o in outs]
    grad_snap = Snapshot(grads)
    input_snap = Snapshot(tensors)
    saved_snap = Snapshot([t for t, _ in saved])
    saved_snap.values = [v for _, v in saved]
    try:
        torch.autograd.grad(outs, values, grads, allow_unused=True)
    except Exception as exc:  # noqa: BLE001
        raise backward_error(exc, NAME, session.function_cls) from None
    findings = []
    for i in grad_snap.changed():
        findings.append(Finding(
            "grad-output-mutated", "error",
            f"backward modified grad_output {subject.out_labels[i]} in place; autograd may "
            "share that tensor with other parts of the graph, whose gradients then go wrong",
            "compute a new tensor (grad_input = grad_output * d, not grad_output.mul_(d) or "
            "grad_output[mask] = 0); clone first if you need in-place", NAME,
            subject.out_labels[i]))
    for i in input_snap.changed():
        findings.append(Finding(
            "input-mutated-in-backward", "error",
            f"backward modified the forward input {labels[i]} in place",
            "never write into inputs from backward; build new tensors", NAME, labels[i]))
    known = {address(x) for x in tensors}  # inputs are reported above
    for i in saved_snap.changed():
        t = saved_snap.tensors[i]
        if address(t) in known or id(t) in reported:
            continue
        findings.append(_saved_in_backward(t, is_once_differentiable(session.function_cls)))
    return findings


def _saved_in_backward(t: torch.Tensor, once: bool) -> Finding:
    if once:
        # No double backward exists; what breaks is a second backward through the same graph
        # (retain_graph=True), which fused kernels trade away for memory on purpose (a fused
        # loss scales the gradient it saved in forward in place). A hazard, not a wrong
        # gradient of the usual training step, which gradsmith checks on a fresh graph.
        return Finding(
            "saved-tensor-mutated", "warning",
            f"backward modifies a tensor saved for backward in place (shape "
            f"{tuple(t.shape)}): one backward per graph is right, but a second backward "
            "through the same graph (retain_graph=True) gets corrupted gradients",
            "if that memory saving is intended, say so in the docstring (retain_graph=True "
            "is unsupported); otherwise treat ctx.saved_tensors as read-only: x = x * 2, "
            "not x *= 2", NAME)
    return Finding(
        "saved-tensor-mutated", "error",
        f"backward modified a tensor saved for backward in place (shape "
        f"{tuple(t.shape)}); a second backward (retain_graph) or double backward then "
        "uses corrupted values",
        "treat ctx.saved_tensors as read-only: x = x * 2, not x *= 2", NAME)
