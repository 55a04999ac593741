"""A flag and a count forward saves as tensors for backward's ``if`` (issue 18, corpus 10b
held-out, spent: a gradient quantiser ``ctx.save_for_backward(torch.tensor(quantize),
torch.tensor(repeat))`` ... ``quant, repeat = ctx.saved_tensors; if quant:``).

Forward never uses the flag, so synthesis gave it a float tensor, and backward raised "Boolean
value of Tensor with more than one value is ambiguous" on every layout: a skip. Now the flag is
read through the saved tensors as backward tests it: False first, True as a variant, so each
branch runs. Gradients compared with autograd of the same expression; a backward wrong only in
the branch the flag selects still fails.
"""

from __future__ import annotations

import torch
from source_cases import check_rows, error_codes, load_source

from gradsmith.discovery import Synthesized, synthesize
from gradsmith.discovery.saved_values import saved_locals

SOURCE = '''
import torch


class Doubled(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, averaged, repeat):
        ctx.save_for_backward(torch.tensor(averaged), torch.tensor(repeat))
        return x * 2

    @staticmethod
    def backward(ctx, g):
        flag, times = ctx.saved_tensors
        if flag:
            out = [{grad} for _ in range(times)]
            grad = sum(out) / times
        else:
            grad = g * 2
        return grad, None, None
'''
RIGHT = "g * 2"
WRONG = "g * 3"  # only where the flag is set


def test_the_flag_is_read_through_the_saved_tensors_and_both_branches_run(tmp_path):
    path = tmp_path / "saved_flag_ops.py"
    path.write_text(SOURCE.format(grad=RIGHT))
    module = load_source(path, "saved_flag_ops")
    assert saved_locals(module.Doubled, ["x", "averaged", "repeat"]) == {
        "flag": "averaged", "times": "repeat"}
    found = synthesize(module.Doubled)
    assert isinstance(found, Synthesized), found
    x, flag, repeat = found.args
    assert flag is False and type(repeat) is int and repeat >= 1
    assert any("averaged=True" in v.change for v in found.variants), found.variants
    for value in (False, True):
        y = x.detach().clone().requires_grad_()
        g = torch.randn(y.shape, dtype=y.dtype)
        (got,) = torch.autograd.grad(module.Doubled.apply(y, value, repeat), y, g)
        z = x.detach().clone().requires_grad_()
        (reference,) = torch.autograd.grad(z * 2, z, g)  # autograd of the same expression
        torch.testing.assert_close(got, reference)


def test_a_right_backward_passes_where_it_was_skipped(tmp_path):
    row = check_rows(tmp_path / "saved_flag_right.py", SOURCE.format(grad=RIGHT))["Doubled"]
    assert row["verdict"] == "pass", row.get("reason") or row.get("text")


def test_a_backward_wrong_only_behind_the_flag_still_fails(tmp_path):
    row = check_rows(tmp_path / "saved_flag_wrong.py", SOURCE.format(grad=WRONG))["Doubled"]
    assert row["verdict"] == "fail"
    assert "gradient-mismatch" in error_codes(row)


COUNTERS = '''
import torch


class Weighted(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, stats):
        ctx.save_for_backward(x, w, stats)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w, counts = ctx.saved_tensors
        seen, limit = counts[0], counts[1]
        if seen <= limit:
            grad_x = g * w
        else:
            grad_x = {grad}
        return grad_x, g * x, None
'''


def test_a_saved_tensor_whose_entries_backward_compares_holds_counters(tmp_path):
    """Corpus 10a held-out (spent), a Hebbian layer: ``n_seen, size = ups[0], ups[1]; if
    n_seen <= size:``. A (3, 4) ``ups`` made backward raise "Boolean value of Tensor ...
    ambiguous" (a backward-error the inputs caused); now ``ups`` holds two whole numbers,
    ascending first and descending as a variant, and a backward wrong only in the branch the
    descending one takes fails."""
    from gradsmith.discovery.saved_values import saved_counters

    path = tmp_path / "counter_ops.py"
    path.write_text(COUNTERS.format(grad="g * w"))
    module = load_source(path, "counter_ops")
    assert saved_counters(module.Weighted, ["x", "w", "stats"]) == {"stats": 2}
    found = synthesize(module.Weighted)
    assert isinstance(found, Synthesized), found
    x, w, stats = found.args
    assert stats.tolist() == [2, 5] and stats.dtype == torch.int64
    assert any("stats=(5, 2)" in v.change for v in found.variants), found.variants
    row = check_rows(tmp_path / "counter_right.py", COUNTERS.format(grad="g * w"))["Weighted"]
    assert row["verdict"] == "pass", row.get("reason") or row.get("text")
    row = check_rows(tmp_path / "counter_wrong.py", COUNTERS.format(grad="g * w * 2"))[
        "Weighted"]
    assert row["verdict"] == "fail"
    assert "gradient-mismatch" in error_codes(row)
