"""A gradient error where forward is a guessed callable: judged by what backward alone shows
(private).

Some Functions take the function forward runs as an argument (xkernels' ``SwigluAct(g, u,
kernel)`` returns ``kernel(g, u)``, a Triton or CUDA kernel the project passes; backward is
closed-form torch). Synthesis invents the callable, so forward is a guess, and backward, exact
for the real kernel, disagrees with finite differences of every guess: a FAIL (the error
"held on the other candidates") on a correct Function. No invented callable can confirm
harm there; but backward alone can, when it does not depend on the callable: a backward that
is the gradient of *any* forward has a symmetric derivative (``d grad_x[i] / d y[j] = d
grad_y[j] / d x[i]``: the Hessian of ``<v, forward>`` for the fixed incoming gradient ``v``).

:func:`judged` runs only after such an error held on every candidate, and only where a guessed
argument is a callable and backward returns the same gradients under two different callables
(so it reads none of their output) while forward's output changes with it (forward returns
what the callable computes, not a value it was given). It differentiates backward's gradients by central
differences, in float64, on at most :data:`MAX_INPUTS` input elements: an asymmetric
derivative is demonstrated harm whatever the callable computes, and the FAIL stands with it
said; a symmetric one leaves the error unshown (backward is the exact gradient of some forward,
perhaps the real callable's), and the row is INCOMPLETE, never PASS.
"""

from __future__ import annotations

from typing import Any

from gradsmith.checker.seeded import seeded_grads

#: Input elements above which the derivative of backward is not formed (2 per element).
MAX_INPUTS = 256
#: Relative asymmetry of the derivative that differences of float64 backward cannot explain.
ASYMMETRY = 1e-4


def judged(fn: Any, args: tuple, names: list[str]) -> tuple[bool, str] | None:
    """``(symmetric, said)`` for ``fn`` on ``args`` when a guessed argument among ``names`` is
    a callable whose output backward does not read (see the module); else None."""
    import torch

    from gradsmith.discovery.callables import SyntheticFn

    params = _names(fn, len(args))
    spots = [i for i, a in enumerate(args) if isinstance(a, SyntheticFn)
             and (i >= len(params) or params[i] in names or not names)]
    xs = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)
          and a.is_floating_point() and a.requires_grad]
    if not spots or not xs or sum(args[i].numel() for i in xs) > MAX_INPUTS:
        return None
    base = [args[i].detach().to(torch.float64) for i in xs]
    other = list(args)
    for i in spots:
        other[i] = SyntheticFn(args[i].weight + 0.5, args[i].reduce)
    if not _forward_follows(fn, args, tuple(other)):
        return None  # forward's value is not the callable's: the gradients check stands
    first = _gradient(fn, args, xs, base)
    if first is None or not bool(torch.isfinite(first).all()) or not bool(first.any()):
        return None
    second = _gradient(fn, tuple(other), xs, base)
    if second is None or not torch.allclose(first, second, rtol=1e-9, atol=1e-12):
        return None  # backward reads what the callable returned: nothing to judge alone
    flat = torch.cat([b.reshape(-1) for b in base])
    columns = []
    for j in range(flat.numel()):
        h = 1e-6 * max(1.0, abs(float(flat[j])))
        plus, minus = flat.clone(), flat.clone()
        plus[j] += h
        minus[j] -= h
        gp = _gradient(fn, args, xs, _split(plus, base))
        gm = _gradient(fn, args, xs, _split(minus, base))
        if gp is None or gm is None:
            return None
        columns.append((gp - gm) / (2 * h))
    hessian = torch.stack(columns, 1)  # [i, j] = d grad[i] / d x[j]
    gap = (hessian - hessian.T).abs()
    bound = ASYMMETRY * (1 + hessian.abs() + hessian.T.abs())
    labels = [f"{params[i] if i < len(params) else i}[{k}]" for i in xs
              for k in range(args[i].numel())]
    callables = ", ".join(params[i] if i < len(params) else str(i) for i in spots)
    if not bool((gap > bound).any()):
        return True, (f"forward returns what the guessed {callables} computes, which backward "
                      "does not read, and backward is the gradient of some forward (its "
                      "derivative is symmetric): right for a callable gradsmith cannot know")
    worst = divmod(int(torch.argmax(gap - bound)), flat.numel())
    i, j = worst
    return False, (f"whatever {callables} computes, backward is the gradient of no forward: "
                   f"d grad {labels[i]} / d {labels[j]} = {float(hessian[i, j]):.6g} but "
                   f"d grad {labels[j]} / d {labels[i]} = {float(hessian[j, i]):.6g} "
                   "(a gradient's derivative is symmetric)")


def _forward_follows(fn: Any, args: tuple, other: tuple) -> bool:
    """Whether forward's outputs change with the callable (it returns what the callable
    computes, not a value it was given, such as a root found outside)."""
    import torch

    outs = []
    for call in (args, other):
        try:
            with torch.random.fork_rng(devices=[]), torch.no_grad():
                torch.manual_seed(0)
                out = fn.apply(*call) if isinstance(fn, type) else fn(*call)
        except Exception:  # noqa: BLE001
            return False
        outs.append([o for o in (out if isinstance(out, (tuple, list)) else (out,))
                     if isinstance(o, torch.Tensor)])
    return len(outs[0]) == len(outs[1]) and any(
        a.shape != b.shape or not torch.allclose(a, b) for a, b in zip(*outs))


def _names(fn: Any, count: int) -> list[str]:
    from gradsmith.discovery.source import forward_parameters

    names = forward_parameters(fn) if isinstance(fn, type) else []
    return names[:count]


def _split(flat: Any, like: list) -> list:
    out, at = [], 0
    for b in like:
        out.append(flat[at:at + b.numel()].reshape(b.shape))
        at += b.numel()
    return out


def _gradient(fn: Any, args: tuple, xs: list[int], values: list) -> Any:
    """Backward's gradients (float64, flat) at ``values`` for a fixed incoming gradient."""
    import torch

    call = list(args)
    leaves = []
    for i, v in zip(xs, values):
        leaf = v.detach().clone().to(args[i].dtype).requires_grad_()
        call[i] = leaf
        leaves.append(leaf)
    if (grads := seeded_grads(fn, call, leaves, seed=7)) is None:
        return None
    return torch.cat([(g if g is not None else torch.zeros_like(x)).reshape(-1).to(
        torch.float64) for g, x in zip(grads, leaves)])
