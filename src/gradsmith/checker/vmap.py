"""Point 3b: ``torch.func.vmap`` over a Function (``vmap`` staticmethod or
``generate_vmap_rule = True``) against a Python loop, for forward and per-sample gradients.

A ``setup_context``-style Function with neither is refused by ``torch.func.vmap`` (torch 2.x
raises "To use autograd.Function with vmap, you must either override the vmap staticmethod or
set generate_vmap_rule=True" by design): that is a ``vmap-no-rule`` warning, the Function does
not support vmap, and its hint says how to add it (whether ``generate_vmap_rule = True`` works,
checked by running vmap with it). An old-style Function is the torch_func check's. A Function
that opts in to vmap and then crashes under it (``vmap-error``) or gives other values than a
loop (``vmap-mismatch``) breaks what it offers: an error, whose message names the opt-in.

vmap refuses random operations by default (``randomness="error"``). A forward that draws
random numbers is checked with ``randomness="same"``, which is what a loop that replays one
random state computes, and ``randomness="different"`` (independent samples, what dropout in a
per-sample-gradient computation wants) must also run; an info finding says so.
"""

from __future__ import annotations

import re

import torch

from gradsmith.checker.deploy._common import comparable_only, is_random, replayable
from gradsmith.checker.inputs import overrides
from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session, Skip
from gradsmith.checker.tensors import close, max_diff

NAME = "vmap"
BATCH = 3


def run(session: Session) -> list[Finding]:
    cls = session.function_cls
    if cls is None or not (getattr(cls, "generate_vmap_rule", False) or overrides(cls, "vmap")):
        if (cls is None or not overrides(cls, "setup_context")
                or not session.options.extra.get("compat", True)):
            # Old style: torch_func's func-needs-setup-context already covers vmap; and
            # whether vmap *could* run is a deployment question (--no-compat skips it).
            raise Skip("the Function defines neither vmap nor generate_vmap_rule")
        return _no_rule(session, cls)
    # A Function whose runs are not replayable gives the loop and vmap different draws.
    optin = ("a vmap staticmethod" if overrides(cls, "vmap") else "generate_vmap_rule = True")
    return comparable_only(session, _vmapped(session, optin), NAME)


def _no_rule(session: Session, cls: type) -> list[Finding]:
    """A setup_context-style Function without a vmap rule: torch.func.vmap refuses it. Say so,
    and whether ``generate_vmap_rule = True`` fixes it (tried on the class, then restored)."""
    found = _vmapped(session)
    if not any(f.code == "vmap-error" and "generate_vmap_rule" in f.message for f in found):
        return found  # torch ran it after all (a wrapper that never vmaps the Function)
    had = "generate_vmap_rule" in vars(cls)
    before = vars(cls).get("generate_vmap_rule")
    cls.generate_vmap_rule = True
    try:
        fixed = _vmapped(session)
    except Exception as exc:  # noqa: BLE001 - the fix is only a suggestion
        fixed = [Finding("vmap-error", "error", str(exc), "", NAME)]
    finally:
        if had:
            cls.generate_vmap_rule = before
        else:
            del cls.generate_vmap_rule
    broken = [f for f in fixed if f.severity != "info"]
    verified: bool | None = not broken
    if not replayable(session):  # vmap and the loop saw different draws: no verdict
        verified = None
        fix = ("add `generate_vmap_rule = True` or write a vmap staticmethod (not verified: "
               "two runs of the Function from the same torch random state differ)")
    elif broken:
        fix = ("write a vmap staticmethod: generate_vmap_rule = True does not work here "
               f"({broken[0].message.splitlines()[0][:160]})")
    else:
        fix = (f"add `generate_vmap_rule = True` to {cls.__name__} (verified: vmap then "
               "agrees with a loop over the batch, outputs and per-sample gradients)")
    return [Finding(
        "vmap-no-rule", "warning",
        "torch.func.vmap refuses the Function: it defines neither a vmap staticmethod nor "
        "generate_vmap_rule = True, so vmap over it fails, and with it per-sample gradients "
        "(vmap over grad)", fix, NAME,
        details={"generate_vmap_rule_fixes": verified})]


def _vmapped(session: Session, optin: str = "") -> list[Finding]:
    """vmap of forward and of per-sample gradients against a loop; ``optin``: how the Function
    opts in to vmap (named by a crash's message), empty while trying a rule for it."""
    subject = session.subject
    base = subject.base()
    random = is_random(session)
    randomness = "same" if random else "error"
    gen = session.generator(29)
    batches = [torch.stack([x + 0.05 * torch.randn(x.shape, generator=gen, dtype=torch.float64)
                            .to(x.dtype) for _ in range(BATCH)]) for x in base]
    try:
        got = torch.func.vmap(lambda *xs: tuple(subject.select(subject.call(list(xs)))),
                              randomness=randomness)(*batches)
    except Exception as exc:  # noqa: BLE001
        return [_error(exc, "forward", optin, base)]
    want = [torch.stack(o) for o in zip(*[subject.select(subject.call([b[i] for b in batches]))
                                          for i in range(BATCH)])]
    findings = _compare(subject, got, want, "forward output", optin=optin)
    vs = [torch.randn(w.shape[1:], generator=gen, dtype=torch.float64).to(w.dtype) for w in want]

    def loss(*xs):
        outs = subject.select(subject.call(list(xs)))
        return sum((o * v).sum() for o, v in zip(outs, vs))

    try:
        got_g = torch.func.vmap(torch.func.grad(loss, argnums=tuple(range(len(base)))),
                                randomness=randomness)(*batches)
    except Exception as exc:  # noqa: BLE001
        return findings + [_error(exc, "per-sample gradient", optin, base)]
    want_g = []
    for i in range(BATCH):
        xs = [b[i].clone().requires_grad_(True) for b in batches]
        want_g.append(torch.autograd.grad(loss(*xs), xs, allow_unused=True))
    want_g = [torch.stack([g if g is not None else torch.zeros_like(b[0]) for g in gs])
              for gs, b in zip(zip(*want_g), batches)]
    findings += _compare(subject, got_g, want_g, "per-sample gradient", subject.labels, optin)
    if random:
        findings.append(_randomness(subject, batches))
    return findings


def _randomness(subject, batches) -> Finding:
    try:
        torch.func.vmap(lambda *xs: tuple(subject.select(subject.call(list(xs)))),
                        randomness="different")(*batches)
        different = "randomness='different' (independent samples) runs too"
    except Exception as exc:  # noqa: BLE001
        different = (f"randomness='different' raised {type(exc).__name__}: "
                     f"{str(exc).splitlines()[0] if str(exc) else ''}")
    return Finding(
        "vmap-randomness", "info",
        "forward draws random numbers, which vmap refuses by default (randomness='error'): "
        "checked with randomness='same' against a loop that replays one random state; "
        f"{different}",
        "call torch.func.vmap(fn, randomness='different') for independent samples per batch "
        "element, or 'same' for one shared draw", NAME)


def _compare(subject, got, want, what, labels=None, optin: str = "") -> list[Finding]:
    labels = labels or subject.out_labels
    claim = f"the Function opts in to vmap ({optin}) and " if optin else ""
    out = []
    for label, a, b in zip(labels, got, want):
        # vmap and the loop may sum in another order: a few hundred ulps of the dtype compared
        # (a float32 Function checked in float32 differs from its loop by ~1e-7)
        eps = max((torch.finfo(t.dtype).eps for t in (a, b)
                   if t is not None and (t.is_floating_point() or t.is_complex())), default=0.0)
        if not close(a, b, max(1e-7, 100 * eps), max(1e-9, 10 * eps)):
            out.append(Finding(
                "vmap-mismatch", "error",
                f"{claim}vmap {what} for {label} differs from a loop over the batch (max "
                f"difference {max_diff(a, b) if a.shape == b.shape else float('nan'):.3g})",
                "fix the vmap staticmethod (out_dims, moving the batch dim) or use "
                "generate_vmap_rule = True with setup_context-style forward", NAME, label))
    return out


def _error(exc: BaseException, what: str, optin: str = "", base=()) -> Finding:
    claim = (f"the Function opts in to vmap ({optin}), so its users' vmap crashes: "
             if optin else "")
    hint = ("generate_vmap_rule needs forward(*args) + setup_context(ctx, inputs, output) and "
            "backward built from torch ops (no .item(), numpy or data-dependent Python control "
            "flow); otherwise write a vmap staticmethod or drop the vmap claim")
    shape = re.search(r"shape '\[([\d, ]*)\]' is invalid", str(exc))
    if shape and any(tuple(x.shape) == _ints(shape.group(1)) for x in base):
        hint = (f"a per-sample shape ({shape.group(1)}) was applied to a tensor that still has "
                "vmap's batch dimension: under vmap setup_context and backward see per-sample "
                "shapes, and a tensor taken out of vmap's wrapper (unwrapped, or returned by a "
                "kernel that does not batch) carries the batch too; reshape with the tensor's "
                "own leading dimensions (t.reshape(*t.shape[:-k], *shape)), or " + hint)
    return Finding(
        "vmap-error", "error",
        f"{claim}torch.func.vmap ({what}) raised {type(exc).__name__}: {exc}", hint, NAME,
        details={"opt_in": optin} if optin else {})


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(n) for n in text.split(",") if n.strip())
