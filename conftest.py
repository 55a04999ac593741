"""Settings for the whole test run (tests/ and the doctests in src/), loaded before any test
module and before torch; benchmarks/results/test_suite_cost.md has the measurements.

One OpenMP thread per process. On a busy machine torch's idle workers spin while they wait for
the next task: 1,000 backward calls of a small Function took 7.7 CPU-s with two threads and
0.45 CPU-s with one, for the same work. The README's ``python -m pytest -n 2 --dist loadscope``
uses the cores with one worker each instead (``loadscope``: a module's tests run on one worker,
so a module-scoped fixture, such as a compiled matrix or a warmed-up server, is built once).
Tests of thread-dependent code set their thread count themselves; an ``OMP_NUM_THREADS`` set by
the caller is kept; processes the tests start inherit it.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
