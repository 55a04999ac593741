"""Which inputs' gradients pass through a TF32 operand, and how long their reductions are.

The TF32 calibration (:mod:`gradsmith.checker.tf32`) once widened every input's tolerance, with
``K`` the largest input dimension (batch included): ``x(4, 64) @ w`` got rtol 6.8 % for every
input, so a bias gradient that never goes through TF32 passed 10 % wrong. Both are measured
here, per input, with a few forwards and backwards at the example inputs:

- **TF32 in forward**: moving one element by ``2**-16`` of itself (far above float32's spacing,
  16x below TF32's) leaves every output bit for bit unchanged when forward rounds that input to
  TF32 before multiplying (it crosses a TF32 rounding boundary with probability 1/32); a
  float32 use (a bias added) changes the output. Its finite differences then carry TF32's step
  rounding.
- **TF32 in backward**: moving one element of the incoming gradient the same way leaves the
  input's gradient bit for bit unchanged when backward rounds the incoming gradient to TF32
  (``g @ w.T`` in a ``tl.dot``); ``g.sum(0)`` changes. A backward that is not bit-for-bit
  reproducible (atomics) cannot be read this way and counts as TF32.
- **reduction length** ``K``: the analytic ``(J^T v)_j`` sums over the output elements that
  element ``j`` reaches (counted: outputs that change when it moves), which is a dot's
  reduction in backward (``g @ w.T`` sums over the output's features, ``x.T @ g`` over its
  rows). A nested product (attention's ``dS @ k`` sums over keys) can sum over a dimension of
  the outputs or of another input instead: ``K`` is the largest of the counted reach, the
  outputs' dimensions and the other inputs' dimensions that are not sizes of this input's own.

Most of three sampled elements decide each reading (a TF32 element crosses a rounding boundary
with probability 1/32).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gradsmith.checker.problem import Problem

#: Relative move below TF32's spacing (2**-10) and far above float32's (2**-23).
NUDGE = 2.0 ** -16
SAMPLES = 3


@dataclass
class Reading:
    """What was measured for one input."""

    forward: bool   # forward rounds it to TF32
    backward: bool  # its gradient comes from a TF32 product of the incoming gradient
    reduction: int  # K: how many terms its gradient elements sum, bounded as the module says

    @property
    def tf32(self) -> bool:
        return self.forward or self.backward


def read(problem: Problem, h: float, gen: torch.Generator) -> list[Reading]:
    """One :class:`Reading` per input of ``problem``; ``h`` moves elements for the reach."""
    xs = problem.xs
    f0 = problem.value()
    picks = [_sample(x, gen) for x in xs]
    v = torch.randn(problem.m, generator=gen, dtype=torch.float64).to(xs[0].dtype) + 2
    base = problem.vjp(v)
    again = problem.vjp(v)
    reproducible = [bool((a == b).all()) for a, b in zip(base, again)]
    unchanged_grad = [0] * len(xs)
    nudges = _sample(v, gen)
    for i in nudges:
        nudged = v.clone()
        nudged[i] = nudged[i] * (1 + NUDGE)
        for t, (a, b) in enumerate(zip(base, problem.vjp(nudged))):
            unchanged_grad[t] += bool((a == b).all())
    readings = []
    for t, x in enumerate(xs):
        unchanged_out, reach = 0, 1
        for j in picks[t]:
            nudge = torch.zeros_like(x).reshape(-1)
            nudge[j] = x.reshape(-1)[j] * NUDGE
            unchanged_out += bool((problem.shifted(t, nudge.reshape(x.shape)) == f0).all())
            nudge[j] = h * max(1.0, abs(float(x.reshape(-1)[j])))
            reach = max(reach, int((problem.shifted(t, nudge.reshape(x.shape)) != f0).sum()))
        readings.append(Reading(
            forward=2 * unchanged_out > len(picks[t]) > 0,
            backward=not reproducible[t] or 2 * unchanged_grad[t] > len(nudges),
            reduction=max(reach, _dimensions(problem, t))))
    return readings


def _sample(x: torch.Tensor, gen: torch.Generator) -> list[int]:
    """Up to :data:`SAMPLES` flat indices of non-zero elements (0 cannot be nudged)."""
    nonzero = torch.nonzero(x.reshape(-1) != 0).reshape(-1)
    order = torch.randperm(len(nonzero), generator=gen)[:SAMPLES]
    return [int(nonzero[i]) for i in order]


def _dimensions(problem: Problem, t: int) -> int:
    """The largest output dimension, and of the other inputs' dimensions not sized like one of
    input ``t``'s own (a dimension it shares is indexed, not summed)."""
    own = set(problem.xs[t].shape)
    others = [d for u, x in enumerate(problem.xs) if u != t for d in x.shape if d not in own]
    outs = [d for shape in problem.out_shapes for d in shape]
    return max([1, *others, *outs])
