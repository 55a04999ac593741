"""An argument a forward samples from is built as a probability vector (issue 18, corpus 11
part c: ``np.random.choice(length, p=probs.cpu().numpy())`` raised "probabilities are not
non-negative" on every layout and the Function was skipped). Reduced cases, written here: a
categorical expectation through ``torch.multinomial``'s argument, and a NumPy draw."""

import numpy as np
import torch
from source_cases import check_rows, error_codes

from gradsmith.discovery.hints import Hint
from gradsmith.discovery.simplexes import on_simplex, read_simplexes

SOURCE = '''
import torch


class ExpectedRow(torch.autograd.Function):
    """sum_i p_i * rows_i, after checking p can be sampled (multinomial raises otherwise)."""

    @staticmethod
    def forward(ctx, rows, probs):
        torch.multinomial(probs, 1)
        ctx.save_for_backward(rows, probs)
        return probs @ rows

    @staticmethod
    def backward(ctx, g):
        rows, probs = ctx.saved_tensors
        return probs[:, None] * g[None, :], {grad_probs}
'''
RIGHT = "rows @ g"
WRONG = "rows @ g * 2"  # a planted wrong factor


def test_samplers_mark_their_probability_argument():
    def forward(ctx, outputs, probs, q, w):
        idx = np.random.choice(len(probs), p=probs.cpu().numpy())
        torch.distributions.Categorical(probs=q).sample()
        return outputs[idx] * w.multinomial(1)

    hints = {n: Hint() for n in ("outputs", "probs", "q", "w")}
    read_simplexes(forward, hints)
    assert [hints[n].simplex for n in ("outputs", "probs", "q", "w")] == [False, True, True, True]


def test_a_simplex_value_is_positive_and_sums_to_one():
    value = on_simplex((3, 5), torch.Generator().manual_seed(0))
    assert bool((value > 0).all())
    torch.testing.assert_close(value.sum(-1), torch.ones(3, dtype=torch.float64))


def test_the_expectation_passes_on_a_probability_vector_and_a_wrong_factor_fails(tmp_path):
    row = check_rows(tmp_path / "expected_right.py", SOURCE.format(grad_probs=RIGHT))
    row = row["ExpectedRow"]
    assert "a probability vector" in row["inputs"], row
    # multinomial takes any non-negative weights: finite differences of p @ rows run
    assert row["verdict"] == "pass", row["report"]["findings"]
    row = check_rows(tmp_path / "expected_wrong.py", SOURCE.format(grad_probs=WRONG))
    row = row["ExpectedRow"]
    assert row["verdict"] == "fail"
    assert "gradient-mismatch" in error_codes(row)
