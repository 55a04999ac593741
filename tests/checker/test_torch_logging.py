"""The deployment checks leave torch's logging as they found it, and never feed torch's
structured trace log into handlers a test runner attached (issue 21: each failing pytest item
carried 131-175 empty ``DEBUG torch.__trace`` lines)."""

from __future__ import annotations

import logging

import torch

from gradsmith.checker import check
from gradsmith.examples.gradient_control import Square


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_compile_and_export_write_nothing_to_a_handler_on_the_trace_log():
    # pytest >= 8.4 attaches its capture handler to every non-propagating logger, as here.
    trace = logging.getLogger("torch.__trace")
    collect = _Collect()
    trace.addHandler(collect)
    try:
        before = (list(trace.handlers), trace.level, trace.propagate)
        report = check(Square, torch.randn(3, dtype=torch.float64, requires_grad=True),
                       compat=True)
        after = (list(trace.handlers), trace.level, trace.propagate)
    finally:
        trace.removeHandler(collect)
    assert {"compile", "export"} <= set(report.checks), str(report)
    assert collect.records == []
    assert after == before  # the handler, and torch's own, are back
