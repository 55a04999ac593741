"""A parameter whose ``log(1 - exp(x))`` forward takes (``log(-expm1(x))``, through a helper of
its module) is a log-probability and is synthesised below 0 (issue 18, corpus 13c held-out: a
correct log-space monotonic attention, drawn in [0.5, 1.5), got a false nan-gradient where a
one-row input kept forward finite and backward multiplied the NaN complement by a zero
gradient). Reduced cases, written here; the planted wrong backward FAILs."""

import torch
from source_cases import check_rows, error_codes, load_source

SOURCE = '''
import torch


def _log_1mexp(x):
    return torch.log(-torch.expm1(x))


def _prefix(lp):
    c = _log_1mexp(lp)
    return torch.cat([lp[:1], c[:-1]], 0).cumsum(0), c


class StayLog(torch.autograd.Function):
    """Row 0: lp[0]; row i: lp[0] + log(1 - p[0]) + ... + log(1 - p[i - 1]), in log space."""

    @staticmethod
    def forward(ctx, log_probs):
        out, c = _prefix(log_probs)
        ctx.save_for_backward(log_probs, c)
        return out

    @staticmethod
    def backward(ctx, g):
        lp, c = ctx.saved_tensors
        below = g.flip(0).cumsum(0).flip(0)  # sum of g over rows i >= k
        after = torch.cat([below[1:], torch.zeros_like(below[:1])], 0)
        grad = {sign} after * torch.exp(lp - c)  # d log(1 - e^x) / dx = -e^x / (1 - e^x)
        grad[0] += below[0]
        return grad
'''
RIGHT = {"sign": "-"}
WRONG = {"sign": "+"}  # planted: the complement's derivative with the wrong sign


def test_the_reduced_backward_is_autograd_of_the_same_forward(tmp_path):
    path = tmp_path / "log_complement_case.py"
    path.write_text(SOURCE.format(**RIGHT))
    module = load_source(path, "log_complement_case")
    gen = torch.Generator().manual_seed(4)
    lp = -0.2 - torch.rand(3, 4, dtype=torch.float64, generator=gen)
    lp.requires_grad_()
    g = torch.randn(3, 4, dtype=torch.float64, generator=gen)
    (got,) = torch.autograd.grad(module.StayLog.apply(lp), lp, g)
    p = lp.exp()  # the same sums written with probabilities
    want_out = torch.cat([lp[:1], torch.log(1 - p[:-1])], 0).cumsum(0)
    (want,) = torch.autograd.grad(want_out, lp, g)
    torch.testing.assert_close(got, want)


def test_a_log_probability_is_drawn_below_zero_and_the_planted_wrong_backward_fails(tmp_path):
    row = check_rows(tmp_path / "log_complement_right.py", SOURCE.format(**RIGHT))["StayLog"]
    assert row["verdict"] == "pass", (row["reason"], row["report"]["findings"])
    assert "in (-inf, 0) (forward takes log(1 - exp(x))" in row["inputs"], row["inputs"]
    row = check_rows(tmp_path / "log_complement_wrong.py", SOURCE.format(**WRONG))["StayLog"]
    assert row["verdict"] == "fail", row["reason"]
    assert "gradient-mismatch" in error_codes(row), error_codes(row)
