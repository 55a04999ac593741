"""The float32 systematic-deviation rule decides nothing along a direction that meets a kink
between its steps (issue 18, round 13 task r).

Reduced from a fused MoE router (corpus 13): a top-k selection changes between steps 0.005
and 0.01 along the gradient's signs, the one-sided gaps jumped (0.0525, 2.12, 10.47 at steps
0.0049, 0.0098, 0.0197) instead of doubling, both Richardson estimates used the crossed steps
and agreed on a 3 % "deviation", and a correct router FAILed gradient-mismatch. A smooth
function's gaps double with the step (``k u^T H u``); rounding-level gaps say nothing. The rule
that still reports a real wrong scale is covered end to end in test_red_team and
tests/triton/test_native_float64.
"""

from __future__ import annotations

import pytest

from gradsmith.checker.systematic import _quadratic


@pytest.mark.parametrize("gaps", [
    (0.0525, 2.12, 10.47),    # the router: a selection changes between 0.005 and 0.01
    (0.0187, 0.0921, 0.197),  # a small kink met between the first two steps
    (0.0, 1.0, 1.0),          # a kink at the start: the gap does not shrink with the step
])
def test_gaps_that_do_not_double_are_no_smooth_function(gaps):
    assert not _quadratic(dict(zip((0.5, 1.0, 2.0), gaps)), noise=1e-4)


@pytest.mark.parametrize("gaps", [
    (0.05, 0.1, 0.2),         # curvature: gaps proportional to the step
    (0.051, 0.098, 0.205),    # the same with rounding
    (3e-5, -2e-5, 1e-5),      # a linear function: rounding only
])
def test_gaps_of_a_smooth_function_pass(gaps):
    assert _quadratic(dict(zip((0.5, 1.0, 2.0), gaps)), noise=1e-4)
