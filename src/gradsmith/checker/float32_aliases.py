"""Backward writing into an input that only aliases in float32 (private; part of ``mutation``).

``sin = sin.float()`` copies a float64 tensor but returns a float32 one itself. A backward
that then negates ``sin`` in place (``torch.neg_(sin)`` for the conjugate rotation of a rotary
embedding) leaves float64 inputs alone, so the mutation check, which works in float64, sees
nothing; on the float32 cache users pass, every backward flips the caller's buffer and the
next forward rotates the wrong way (corpus 13d's DeepLinkExt ``RotaryEmbeddingTorch``).

Run only where forward's outputs are float32 although its inputs were float64 (the code
computes in float32, so float32 inputs may alias): the inputs are cast to float32, forward and
backward run once, and an input backward changed is reported. The harm is demonstrated, not
assumed: forward runs again on the same argument objects, and only an output that differs
from the first makes the finding an error (a scratch write that restores the values, or one
forward never reads again, stays a warning).
"""

from __future__ import annotations

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from gradsmith.checker.report import Finding

NAME = "mutation"


def computes_in_float32(out: list[torch.Tensor], values: list[torch.Tensor]) -> bool:
    """Float64 differentiated inputs gave only float32 outputs: the code casts with
    ``.float()`` (or ``.to(torch.float32)``), which returns a float32 input itself."""
    return bool(out) and bool(values) and all(v.dtype == torch.float64 for v in values) \
        and all(o.dtype == torch.float32 for o in out)


def float32_backward_mutations(subject, labels: list[str]) -> list[Finding]:
    """Inputs backward modified in place when every floating input is float32, each an error
    where a second forward on the same arguments gives a different output."""
    values = [x.detach().to(torch.float32).requires_grad_(True) for x in subject.base()]
    args = subject.build(values, user_dtype=True)
    args = _as_float32(args)
    values = [_find(args, v) for v in values]
    flat, _ = tree_flatten(args)
    tensors = [t for t in flat if isinstance(t, torch.Tensor)]
    try:
        first = subject.select(subject.run_built(args))
        firsts = [o.detach().clone() for o in first]
        before = [t.detach().clone() for t in tensors]
        grads = [torch.ones_like(o) for o in first]
        torch.autograd.grad(first, [v for v in values if v is not None], grads,
                            allow_unused=True)
        changed = [i for i, (t, b) in enumerate(zip(tensors, before))
                   if not torch.equal(t.detach(), b)]
        if not changed:
            return []
        again = [o.detach() for o in subject.select(subject.run_built(args))]
    except Exception:  # noqa: BLE001 - float32 is a second look; float64 already ran
        return []
    differs = any(a.shape != b.shape or not torch.equal(a, b) for a, b in zip(firsts, again))
    findings = []
    for i in changed:
        label = labels[i] if i < len(labels) else f"input {i}"
        findings.append(Finding(
            "input-mutated-in-backward", "error" if differs else "warning",
            f"with float32 inputs backward modified the forward input {label} in place (a "
            "`.float()` of a float32 tensor is that tensor, not a copy)"
            + (": forward called again with the same arguments returned a different output, "
               "so every training step after the first computes with the corrupted values"
               if differs else "; a second forward on the same arguments gave the same output"),
            "never write into inputs from backward: use out-of-place ops (`-sin`, not "
            "`torch.neg_(sin)`), or clone after `.float()`", NAME, label))
    return findings


def _as_float32(args):
    """Every floating tensor of the call as float32 (the differentiated ones already are)."""
    flat, spec = tree_flatten(args)
    cast = [t.detach().to(torch.float32).requires_grad_(t.requires_grad)
            if isinstance(t, torch.Tensor) and t.dtype == torch.float64 and not t.requires_grad
            else t for t in flat]
    return tree_unflatten(cast, spec)


def _find(args, value: torch.Tensor) -> torch.Tensor | None:
    flat, _ = tree_flatten(args)
    return next((t for t in flat if t is value), None)
