"""Pool-adjacent-violators for many rows at once, with few rounds: the solver behind ``_isotonic``.

The fit is decreasing and every block is a run of consecutive elements, so a solution is fully
described by where blocks start. A block's value depends only on its element range, read in O(1)
from per-row prefix statistics computed once (prefix sums for l2, suffix log-sum-exps for kl).

One round, for all rows together:

1. find every *chain* of adjacent violating blocks (value non-decreasing left to right) and pool
   it, as one PAV step would;
2. let each pooled chain absorb its neighbours: to the left while the neighbour's value is <= the
   chain's, then to the right while the chain's value is <= the neighbour's, twice. Between two
   chains the blocks are strictly decreasing, so "absorb the next k blocks" is monotone in k and a
   vectorised binary search finds k in O(log n) steps. Every absorption is an ordinary PAV merge
   of adjacent violators, and PAV's optimum does not depend on the merge order, so the result is
   exact. Chains extend only into the gap on one side at a time, so two chains never claim the
   same block.

Rounds repeat until no violation is left. Plain chain pooling needs one round per absorbed block
when a large pooled block eats its neighbours one by one (thousands of rounds at n = 10,000);
the binary search collapses that cascade to a few rounds.
"""

from __future__ import annotations

import torch

__all__ = ["L2Stats", "KLStats", "solve"]


def _padded(index: torch.Tensor, n: int, *, end: bool) -> torch.Tensor:
    """Map a flat element index (row * n + col) into the (rows, n + 1) statistics layout."""
    return index + ((index - 1) // n if end else index // n)


class L2Stats:
    """Range means from per-row prefix sums (float64): the l2 block value."""

    def __init__(self, y: torch.Tensor):
        rows, n = y.shape
        zero = y.new_zeros((rows, 1), dtype=torch.float64)
        self.n = n
        self.prefix = torch.cat([zero, y.double().cumsum(-1)], dim=-1).reshape(-1)

    def value(self, start: torch.Tensor, end: torch.Tensor) -> torch.Tensor:
        total = self.prefix[_padded(end, self.n, end=True)] - self.prefix[_padded(start, self.n,
                                                                                   end=False)]
        return total / (end - start)


class KLStats:
    """Range ``logsumexp(y) - logsumexp(w)`` from per-row suffix log-sum-exps (float64).

    Inputs are sorted decreasingly along a row, so a range's mass is at least 1/n of the mass
    after it and the suffix difference keeps all but ~log10(n) digits.
    """

    def __init__(self, y: torch.Tensor, w: torch.Tensor):
        self.n = y.shape[-1]
        self.suffix_y = self._suffix(y)
        self.suffix_w = self._suffix(w)

    @staticmethod
    def _suffix(x: torch.Tensor) -> torch.Tensor:
        x = x.double()
        suffix = x.flip(-1).logcumsumexp(-1).flip(-1)
        tail = x.new_full((x.shape[0], 1), -torch.inf)
        return torch.cat([suffix, tail], dim=-1).reshape(-1)

    def _lse(self, suffix: torch.Tensor, start: torch.Tensor, end: torch.Tensor) -> torch.Tensor:
        head = suffix[_padded(start, self.n, end=False)]
        rest = suffix[_padded(end, self.n, end=True)]
        gap = (rest - head).clamp(max=-1e-300)
        return head + torch.log(-torch.expm1(gap))

    def value(self, start: torch.Tensor, end: torch.Tensor) -> torch.Tensor:
        return self._lse(self.suffix_y, start, end) - self._lse(self.suffix_w, start, end)


def _chains(violation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """First and last block of each maximal run of violating pairs."""
    v = violation.to(torch.int8)
    edge = torch.diff(v, prepend=v.new_zeros(1), append=v.new_zeros(1))
    left = (edge == 1).nonzero().squeeze(1)
    right = (edge == -1).nonzero().squeeze(1)  # pair index + 1 == last block of the chain
    return left, right


def _search_left(value, starts, ends, vals, left, right, floor):
    """Smallest a in [floor, left] such that blocks a..left-1 can all be absorbed."""
    lo, hi = floor.clone(), left.clone()
    last = starts.numel() - 1
    steps = int((hi - lo).max()).bit_length() if lo.numel() else 0
    for _ in range(steps):
        mid = (lo + hi) // 2
        nxt = (mid + 1).clamp(max=last)
        ok = vals[mid] <= value(starts[nxt], ends[right])
        ok = ok | (mid >= hi)
        hi = torch.where(ok, mid, hi)
        lo = torch.where(ok, lo, mid + 1)
    return hi


def _search_right(value, starts, ends, vals, left, right, ceiling):
    """Largest b in [right, ceiling] such that blocks right+1..b can all be absorbed."""
    lo, hi = right.clone(), ceiling.clone()
    steps = int((hi - lo).max()).bit_length() if lo.numel() else 0
    for _ in range(steps):
        mid = (lo + hi + 1) // 2
        ok = value(starts[left], ends[(mid - 1).clamp(min=0)]) <= vals[mid]
        ok = ok & (mid > lo)
        lo = torch.where(ok, mid, lo)
        hi = torch.where(ok | (mid <= lo), hi, mid - 1)
    return lo


def _row_limits(starts: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """For every block, the index of the first and of the last block of its row."""
    ids = torch.arange(starts.numel(), device=starts.device)
    first = starts % n == 0
    row_first = torch.where(first, ids, torch.zeros_like(ids)).cummax(0).values
    last = torch.ones_like(first)
    last[:-1] = first[1:]
    big = torch.full_like(ids, starts.numel() - 1)
    row_last = torch.where(last, ids, big).flip(0).cummin(0).values.flip(0)
    return row_first, row_last


def solve(stats, rows: int, n: int, device: torch.device, sweeps: int = 2) -> torch.Tensor:
    """Block-start mask (bool, ``rows * n``) of the decreasing isotonic fit described by ``stats``."""
    bounds = torch.ones(rows * n, dtype=torch.bool, device=device)
    total = torch.tensor([rows * n], device=device)
    while True:
        starts = bounds.nonzero().squeeze(1)
        ends = torch.cat([starts[1:], total])
        vals = stats.value(starts, ends)
        row_first, row_last = _row_limits(starts, n)
        violation = (vals[:-1] <= vals[1:]) & (starts[1:] % n != 0)
        if not bool(violation.any()):
            return bounds
        left, right = _chains(violation)
        for _ in range(sweeps):
            prev_right = torch.cat([right.new_full((1,), -1), right[:-1]])
            floor = torch.maximum(prev_right + 1, row_first[left])
            left = _search_left(stats.value, starts, ends, vals, left, right, floor)
            next_left = torch.cat([left[1:], left.new_full((1,), starts.numel())])
            ceiling = torch.minimum(next_left - 1, row_last[right])
            right = _search_right(stats.value, starts, ends, vals, left, right, ceiling)
        delta = torch.zeros(starts.numel() + 1, dtype=torch.int64, device=device)
        delta.index_add_(0, left + 1, torch.ones_like(left))
        delta.index_add_(0, right + 1, -torch.ones_like(right))
        inside = delta.cumsum(0)[:-1] > 0
        bounds[starts[inside]] = False
