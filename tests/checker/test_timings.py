"""Where a check's time went: ``Report.timings`` gives seconds per check (every planned check,
whether it held, failed or was skipped), summed over input sets, within the check's own wall
time, and travels in the JSON report (issue 18: the eager checks' time apart from the
deployment checks')."""

from __future__ import annotations

import torch
from square_functions import Square, SquareOnePercent

import gradsmith
from gradsmith.checker.engine import CHECK_NAMES
from gradsmith.checker.report import Report
from gradsmith.checkrun.sets import check_sets


def _x() -> torch.Tensor:
    return torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))


def test_every_planned_check_is_timed_within_the_wall_time():
    report = gradsmith.check(Square, _x())
    assert report.passed
    planned = set(report.checks) | set(report.skipped)
    assert set(report.timings) == planned
    assert planned <= set(CHECK_NAMES)
    assert all(seconds >= 0 for seconds in report.timings.values())
    assert sum(report.timings.values()) <= report.elapsed
    assert report.to_dict()["timings"] == {k: round(v, 4) for k, v in report.timings.items()}


def test_a_failing_check_is_timed_too():
    report = gradsmith.check(SquareOnePercent, _x())
    assert "gradient-mismatch" in report.codes("error")
    assert report.timings["gradients"] > 0


def test_input_sets_add_their_seconds_per_check():
    sets = [("first", (_x(),)), ("second", (_x() * 3,))]
    merged, *_ = check_sets(Square, "Square", None, {}, "first", sets, synthesised=False)
    alone = gradsmith.check(Square, _x())
    # the second set re-runs only the value-dependent checks; their seconds are added
    assert set(merged.timings) == set(alone.timings)
    assert sum(merged.timings.values()) <= merged.elapsed


def test_timings_of_merged_reports_add_up():
    first, second = Report("a", timings={"gradients": 0.25}), Report(
        "b", timings={"gradients": 0.5, "vmap": 0.125})
    first.add_timings(second)
    assert first.timings == {"gradients": 0.75, "vmap": 0.125}
