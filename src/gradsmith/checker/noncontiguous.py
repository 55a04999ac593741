"""Non-contiguous inputs and incoming gradients, and which one a changed result comes from.

All inputs are first made non-contiguous at once (one run). When results change, each input is
made non-contiguous alone, the others contiguous, so a finding names the input whose layout
the code mishandles (a weight read with unit stride changes the *input's* gradient: the cause
is the weight, not the input) and says which outputs and gradients changed.

A *forward* that raises on a non-contiguous input (``features.view(n, -1)``) fails loudly at the
caller's own call, with a tensor the caller controls: that is a warning naming the input and
saying to call ``.contiguous()``, not an error. A backward that raises, or any result that
changes (outputs, gradients; with a non-contiguous input or ``grad_output``), stays an error:
those reach the user silently or from inside ``loss.backward()``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from gradsmith.checker.arguments import is_float_like, working
from gradsmith.checker.report import Finding
from gradsmith.checker.tensors import close, max_diff, noncontiguous

NAME = "robustness"
HINT = ("do not assume contiguous memory (strides, .view, data_ptr arithmetic): call "
        ".contiguous() (or .reshape) first, in forward and in backward; real inputs and incoming "
        "gradients are often transposed, expanded or slices")


@dataclass
class Changed:
    """What one layout variant changed against the contiguous run."""

    raised: str = ""
    results: list[tuple[str, float]] = field(default_factory=list)  # (what, max difference)
    in_forward: bool = False  # ``raised`` came from forward itself (the caller's own call)

    def __bool__(self) -> bool:
        return bool(self.raised or self.results)

    def describe(self) -> str:
        if self.raised:
            return f"the Function raised {self.raised}"
        parts = [f"{what} (max difference {diff:.3g})" for what, diff in self.results]
        verb = "differs" if len(parts) == 1 else "differ"
        return f"{_join(parts)} {verb} from the contiguous run"


def input_findings(session, base, grads, ref_out, ref_grads, rtol, atol, run) -> list[Finding]:
    """Findings for non-contiguous inputs, each naming the input whose layout changes results.

    ``run(values, leaves, grads, others)`` is one fresh forward/backward (outputs, gradients).
    """
    subject = session.subject
    others = _other_floats(subject)
    every = set(range(len(base))) | {("other", i) for i, _ in others}
    changed = _variant(subject, base, grads, ref_out, ref_grads, rtol, atol, run, others, every)
    if not changed:
        return []
    movable = [t for t, x in enumerate(base) if x.dim() >= 1 and x.numel() > 0]
    movable += [("other", i) for i, _ in others]
    if len(movable) == 1:
        return [_finding(_label(subject, movable[0]), changed, alone=True, only=True)]
    blamed = []
    for key in movable:
        alone = _variant(subject, base, grads, ref_out, ref_grads, rtol, atol, run, others, {key})
        if alone:
            blamed.append(_finding(_label(subject, key), alone, alone=True))
    return blamed or [_finding(None, changed, alone=False)]


def grad_output_finding(subject, changed: Changed) -> list[Finding]:
    """One finding for a non-contiguous grad_output, naming the gradients that changed."""
    if not changed:
        return []
    return [Finding(
        "noncontiguous-mismatch", "error",
        f"with a non-contiguous grad_output (the inputs contiguous), {changed.describe()}",
        HINT, NAME, None, {"made_noncontiguous": "grad_output", "changed": changed_names(changed)})]


def compare(subject, ref_out, ref_grads, thunk, rtol, atol) -> Changed:
    """What a variant run (``thunk()``: outputs, gradients) changed against the reference."""
    try:
        out, grads = thunk()
    except Exception as exc:  # noqa: BLE001 - a layout the code cannot take is the finding
        return Changed(raised=f"{type(exc).__name__}: {exc}")
    changed = Changed()
    for label, a, b in zip(subject.out_labels, ref_out, out):
        if not close(a, b, rtol, atol):
            changed.results.append((f"output {label}", max_diff(a, b)))
    for label, a, b in zip(subject.labels, ref_grads, grads):
        if not close(a, b, rtol, atol):
            changed.results.append((f"the gradient of {label}", max_diff(_z(a, b), _z(b, a))))
    return changed


def changed_names(changed: Changed) -> list[str]:
    return [what for what, _ in changed.results]


def _variant(subject, base, grads, ref_out, ref_grads, rtol, atol, run, others, keys) -> Changed:
    """Inputs in ``keys`` as non-leaf, non-contiguous views (transposed for 2+ dims, strided
    for 1-D, so in-place (mark_dirty) forwards still work), the rest contiguous copies;
    gradients are mapped back to each input's layout."""
    leaves, views, unmaps = [], [], []
    for t, x in enumerate(base):
        leaf, view, unmap = _layout(x) if t in keys else _contiguous(x)
        leaves.append(leaf)
        views.append(view)
        unmaps.append(unmap)
    moved = {i: noncontiguous(v) for i, v in others if ("other", i) in keys}

    def thunk():
        out, gs = run(views, leaves, grads, moved)
        return out, [None if g is None else u(g) for g, u in zip(gs, unmaps)]

    changed = compare(subject, ref_out, ref_grads, thunk, rtol, atol)
    if changed.raised:
        changed.in_forward = _forward_raises(subject, base, others, keys)
    return changed


def _forward_raises(subject, base, others, keys) -> bool:
    """Whether forward alone raises on the same layouts (fresh views: the failed run may have
    changed its own), as opposed to backward."""
    views = [(_layout(x) if t in keys else _contiguous(x))[1] for t, x in enumerate(base)]
    moved = {i: noncontiguous(v) for i, v in others if ("other", i) in keys}
    try:
        subject.call(views, others=moved)
    except Exception:  # noqa: BLE001 - user code: any error is forward's own
        return True
    return False


def _layout(x):
    if x.dim() >= 2:
        leaf = x.transpose(-1, -2).contiguous().requires_grad_(True)
        return leaf, leaf.clone().transpose(-1, -2), lambda g: g.transpose(-1, -2)
    if x.dim() == 1:
        leaf = torch.stack([x, torch.zeros_like(x)], dim=-1).requires_grad_(True)
        return leaf, leaf.clone().select(-1, 0), lambda g: g.select(-1, 0)
    return _contiguous(x)


def _contiguous(x):
    leaf = x.clone().requires_grad_(True)
    return leaf, leaf.clone(), lambda g: g


def _finding(label, changed: Changed, alone: bool, only: bool = False) -> Finding:
    if changed.in_forward:
        return _forward_finding(label, changed, alone)
    if label is None:
        what = "with all inputs non-contiguous at once (no single one alone changes results)"
    elif only:  # the one input a layout applies to
        what = f"with {label} non-contiguous"
    else:
        what = f"with {label} non-contiguous (the other inputs contiguous)"
    misread = "" if label is None else (
        f": the same values of {label} in another memory layout give another result, so "
        f"{label} is read as if contiguous, its stride misread (a kernel that loads "
        f"`{label}_ptr + i` without {label}.stride(), or a `.data_ptr()` walk)")
    return Finding(
        "noncontiguous-mismatch", "error", f"{what}, {changed.describe()}{misread}", HINT, NAME,
        label,
        {"made_noncontiguous": label if alone else "all inputs",
         "changed": changed_names(changed)})


def _forward_finding(label, changed: Changed, alone: bool) -> Finding:
    """Forward itself raises on a non-contiguous input: loud, at the caller's own call."""
    if label is None:
        what, fix = ("all inputs non-contiguous at once (no single one alone)",
                     "call `.contiguous()` on the inputs forward views (or use `.reshape`)")
    else:
        what = label + " non-contiguous"
        fix = (f"call `{label}.contiguous()` in forward (or `.reshape` instead of `.view`) to "
               f"accept a transposed, expanded or sliced {label}; else document that {label} "
               "must be contiguous")
    return Finding(
        "noncontiguous-mismatch", "warning",
        f"forward raises with {what} ({changed.raised}): a caller passing such a tensor gets "
        "this error at their own call, not a wrong result; backward and the results on "
        "contiguous inputs were checked as usual", fix, NAME, label,
        {"made_noncontiguous": label if alone else "all inputs", "raised_in": "forward",
         "changed": []})


def _label(subject, key) -> str:
    if isinstance(key, tuple):
        return subject.args.labels[key[1]]
    return subject.labels[key]


def _other_floats(subject):
    """Float tensors not differentiated (held constant): their layout counts too."""
    args = subject.args
    diff = set(args.diff_pos)
    leaves = args._leaves
    return [(i, working(leaves[i], subject.dtype))
            for i in args.tensor_pos if i not in diff and is_float_like(leaves[i])
            and leaves[i].dim() > 0]


def _z(a, b):
    return torch.zeros_like(b) if a is None else a


def _join(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
