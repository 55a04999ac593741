"""Forward returned a buffer it was handed, untouched: it computed nothing (private).

A Function that fills a preallocated output through a library call (``lct.fbp_cpu(g, f);
return f``: LEAP's tomography operators, whose geometry the caller sets on the library first)
returns that buffer as it came when the library is not set up: it prints an error and writes
nothing. Forward is then constant in every other input and backward's gradient for them
(the transposed operator) disagrees with finite differences of zero: corpus 13's LEAP
filtered back-projections were FAILed as undeclared estimators. Those inputs are outside
what the code is written for, so the comparison shows nothing about backward: INCOMPLETE
(``not-exercised``), not a FAIL. Only where forward's output shares storage with a tensor
argument, holds that argument's values unchanged, and stays so when every other
differentiable input changes, and backward gives the buffer no gradient (a gradient
reversal returns its input's values on purpose); a forward that writes into the buffer is
judged as usual.
"""

from __future__ import annotations

import torch

from gradsmith.checker.report import Finding


def untouched(session, check: str) -> list[Finding]:
    """A ``not-exercised`` finding when forward returns a tensor argument unchanged whatever
    the other differentiable inputs are (see the module), else []."""
    subject = session.subject
    base = [v.detach() for v in subject.base()]
    found = _returned(subject, base)
    if found is None or all(d.leaf == found[0] for d in subject.args.inputs) \
            or _flows_back(session, found[0]):
        return []
    pos, values = found
    gen = torch.Generator().manual_seed(subject.seed)
    moved = [v + torch.randn(v.shape, generator=gen, dtype=torch.float64).to(v.dtype)
             if v.is_floating_point() and d.leaf != pos else v
             for v, d in zip(base, subject.args.inputs)]
    again = _returned(subject, moved)
    if again is None or again[0] != pos or not torch.equal(again[1], values):
        return []
    label = subject.args.labels[pos]
    return [Finding(
        "not-exercised", "warning",
        f"backward was never exercised: forward returned {label}, a tensor it was handed, "
        "with its values unchanged, and still does when every other input changes: the code "
        f"meant to fill {label} (a library call that needs setting up first: a geometry, a "
        "plan, a handle) computed nothing on these inputs, so a gradient compared with "
        "finite differences of zero says nothing about backward; the verdict is INCOMPLETE",
        f"register an example (@gradsmith.example) that sets the library up and passes the "
        f"{label} it fills", check, label, {"incomplete": True, "buffer": label})]


def _flows_back(session, pos: int) -> bool:
    """Backward gives the returned buffer a gradient: forward passes it on on purpose (a
    gradient reversal returns its input's values and negates the gradient), not a buffer a
    library was to fill."""
    grads = session.cache.get("vjp:gradients", (None, [[]]))[1]
    return any(d.leaf == pos and g is not None and bool((g != 0).any())
               for per_v in grads for d, g in zip(session.subject.args.inputs, per_v))


def _returned(subject, diff_values: list[torch.Tensor]):
    """(position, values) of the tensor argument forward's output shares storage with and
    equals as it was handed; None otherwise (or where forward raises)."""
    try:
        args = subject.build([v.clone() for v in diff_values])
        before = [a.detach().clone() if isinstance(a, torch.Tensor) else None for a in args]
        with torch.no_grad():
            out = subject.run_built(args)
    except Exception:  # noqa: BLE001 - a forward that raises here is judged elsewhere
        return None
    outs = out if isinstance(out, (tuple, list)) else (out,)
    if len(outs) != 1 or not isinstance(outs[0], torch.Tensor) or outs[0].numel() == 0:
        return None
    o = outs[0]
    for pos, (a, b) in enumerate(zip(args, before)):
        if isinstance(a, torch.Tensor) and a.data_ptr() == o.data_ptr() \
                and a.shape == o.shape and torch.equal(o.detach(), b):
            return pos, b
    return None
