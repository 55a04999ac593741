"""A ``List[int]`` a TorchScript function's schema asks for is repaired into a list of split
sizes that add up (issue 18, corpus 12d dev: IBM ModuleFormer's ParallelLinear, rows grouped by
expert through ``input.split(expert_size_list)`` in a scripted helper, was a skip). Reduced
case, written here: a grouped linear whose scripted forward splits the rows; the planted wrong
backward FAILs."""

import pytest
import torch
from source_cases import check_rows, error_codes, load_source

SOURCE = '''
from typing import List

import torch
from torch import Tensor


class GroupedLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, rows, group_sizes, weight):
        out = GroupedLinear.scripted(rows, group_sizes, weight)
        ctx.save_for_backward(rows, weight)
        ctx.group_sizes = group_sizes
        return out

    @staticmethod
    @torch.jit.script
    def scripted(rows: Tensor, group_sizes: List[int], weight: Tensor):
        out = torch.empty((rows.size(0), weight.size(2)), dtype=rows.dtype)
        parts, outs = rows.split(group_sizes, dim=0), out.split(group_sizes)
        for i in range(weight.size(0)):
            torch.mm(parts[i], weight[i], out=outs[i])
        return out

    @staticmethod
    def backward(ctx, g):
        rows, weight = ctx.saved_tensors
        parts, grads = rows.split(ctx.group_sizes), g.split(ctx.group_sizes)
        d_rows = torch.cat([grads[i] @ weight[{which}].t() for i in range(len(parts))], 0)
        d_weight = torch.stack([parts[i].t() @ grads[i] for i in range(len(parts))])
        return d_rows, None, d_weight
'''

pytestmark = pytest.mark.filterwarnings(  # the projects still script their helpers
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning")


def test_the_reduced_backward_is_autograd_of_the_grouped_products(tmp_path):
    path = tmp_path / "grouped_case.py"
    path.write_text(SOURCE.format(which="i"))
    grouped = load_source(path, "grouped_case").GroupedLinear
    gen = torch.Generator().manual_seed(7)
    rows = torch.randn(5, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    weight = torch.randn(2, 3, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    g = torch.randn(5, 4, dtype=torch.float64, generator=gen)
    got = torch.autograd.grad(grouped.apply(rows, [2, 3], weight), (rows, weight), g)
    want = torch.autograd.grad(torch.cat([rows[:2] @ weight[0], rows[2:] @ weight[1]]),
                               (rows, weight), g)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)


def test_a_scripted_list_argument_becomes_split_sizes_and_the_planted_backward_fails(tmp_path):
    row = check_rows(tmp_path / "grouped_right.py", SOURCE.format(which="i"))["GroupedLinear"]
    assert row["verdict"] == "pass", (row["reason"], row["report"]["findings"])
    assert "group_sizes=[1, 3] (repaired" in row["inputs"], row["inputs"]
    assert "split sizes adding up to 4" in row["inputs"], row["inputs"]
    # planted: every group's rows given the first expert's weight in backward
    row = check_rows(tmp_path / "grouped_wrong.py", SOURCE.format(which="0"))["GroupedLinear"]
    assert row["verdict"] == "fail", row["reason"]
    assert error_codes(row) & {"gradient-mismatch", "backward-error"}, error_codes(row)
