"""``gradsmith bench``: speed and saved-for-backward memory of catalog ops against references.

Library API:

- :func:`saved_bytes` (exact bytes autograd keeps for backward, deduplicated by storage),
- :func:`measure` / :func:`interleaved` (forward+backward time, median and spread),
- :func:`registry` (every catalog op with its reference), :func:`run` (the full report),
- :mod:`gradsmith.bench.report` (rich table, markdown, JSON, bar chart).
"""

from gradsmith._requires import require_torch

require_torch("gradsmith.bench")

from gradsmith.bench.cases import BenchCase, registry  # noqa: E402
from gradsmith.bench.memory import saved_bytes  # noqa: E402
from gradsmith.bench.runner import environment, run, run_case  # noqa: E402
from gradsmith.bench.timing import Stats, interleaved, measure  # noqa: E402

__all__ = ["BenchCase", "Stats", "environment", "interleaved", "measure", "registry", "run",
           "run_case", "saved_bytes"]
