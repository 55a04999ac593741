"""``gradsmith bench``: speed and memory of custom ops and Functions against references.

Library API:

- :func:`saved_bytes` (exact bytes kept for backward: saved tensors and tensors on ``ctx``,
  deduplicated by storage), :func:`peak_bytes` (peak memory of a step),
- :func:`measure` / :func:`interleaved` (forward+backward time, median and spread),
- :func:`registry` (every catalog op with its reference), :func:`run` (the full report),
  :func:`case_for` (a user Function against its reference),
- :mod:`gradsmith.bench.report` (rich table, markdown, JSON, chart).
"""

from gradsmith._requires import require_torch

require_torch("gradsmith.bench")

from gradsmith.bench.cases import BenchCase, registry  # noqa: E402
from gradsmith.bench.memory import ctx_tensors, peak_bytes, saved_bytes  # noqa: E402
from gradsmith.bench.runner import environment, run, run_case  # noqa: E402
from gradsmith.bench.timing import Stats, interleaved, measure, ratio_spread  # noqa: E402
from gradsmith.bench.user import autograd_of_forward, case_for  # noqa: E402

__all__ = ["BenchCase", "Stats", "autograd_of_forward", "case_for", "ctx_tensors",
           "environment", "interleaved", "measure", "peak_bytes", "ratio_spread", "registry",
           "run", "run_case", "saved_bytes"]
