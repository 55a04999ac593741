"""``gradsmith bench``: speed and saved-for-backward memory of catalog ops against references.

Library API:

- :func:`saved_bytes` (exact bytes autograd keeps for backward, deduplicated by storage),
- :func:`measure` / :func:`interleaved` (forward+backward time, median and spread),
- :func:`registry` (every catalog op with its reference), :func:`run` (the full report),
- :mod:`gradsmith.bench.report` (rich table, markdown, JSON, bar chart).
"""

from gradsmith.bench.cases import BenchCase, registry
from gradsmith.bench.memory import saved_bytes
from gradsmith.bench.runner import environment, run, run_case
from gradsmith.bench.timing import Stats, interleaved, measure

__all__ = ["BenchCase", "Stats", "environment", "interleaved", "measure", "registry", "run",
           "run_case", "saved_bytes"]
