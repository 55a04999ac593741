"""Integer settings a layer passes to its Function (issue 18, corpus 5: N:M sparsity masks).

``forward(ctx, weight, N, M, decay=2e-4)`` groups the weight's elements by ``M`` and keeps the
``N`` largest of each group: ``N`` and ``M`` must be ints and ``M`` must divide the weight's
size, which no name says. The module does: a layer ``__init__(..., N=1, M=4)`` stores
``self.N = N`` and calls ``Prune.apply(self.weight, self.N, self.M)``; a helper calls
``Keep.apply(w, 2, 4)``. Synthesis skipped them (floats 0.1, then "reshape(): ... got float");
now the first set takes what the call site passes. Backward returns three values, so no working
call passes ``decay``: synthesis leaves it at its default instead of provoking
``wrong-grad-count``. Reduced cases written here; gradients compared with autograd of
``weight * mask`` (the mask a constant) and a hand-made mask.
"""

from __future__ import annotations

import importlib.util
import textwrap

import pytest
import torch

from gradsmith.checkrun.session import run_check
from gradsmith.discovery import Source, Synthesized, synthesize
from gradsmith.discovery.defaults import stated_defaults

FUNCTIONS = '''
import torch
from torch import nn
from torch.autograd import Function


def _mask(weight, N, M):
    groups = weight.detach().abs().reshape(int(weight.numel() / M), M)
    drop = torch.argsort(groups, dim=1)[:, :int(M - N)]
    return torch.ones_like(groups).scatter_(1, drop, 0.0).reshape(weight.shape)


class Prune(Function):
    """Keeps the N largest magnitudes of every M consecutive weights."""

    @staticmethod
    def forward(ctx, weight, N, M, decay=2e-4):
        mask = _mask(weight, N, M)
        ctx.save_for_backward(mask)
        return weight * mask

    @staticmethod
    def backward(ctx, g):
        (mask,) = ctx.saved_tensors
        return g * mask, None, None


class PruneWrong(Function):
    @staticmethod
    def forward(ctx, weight, N, M, decay=2e-4):
        mask = _mask(weight, N, M)
        ctx.save_for_backward(mask)
        return weight * mask

    @staticmethod
    def backward(ctx, g):
        (mask,) = ctx.saved_tensors
        return g * (1 - mask), None, None            # planted: the pruned ones


class Keep(Function):
    @staticmethod
    def forward(ctx, weight, N, M):
        mask = _mask(weight, N, M)
        ctx.save_for_backward(mask)
        return weight * mask

    @staticmethod
    def backward(ctx, g):
        (mask,) = ctx.saved_tensors
        return g * mask, None, None


class PrunedLinear(nn.Linear):
    def __init__(self, in_features, out_features, bias=True, N=1, M=4):
        super().__init__(in_features, out_features, bias)
        self.N = N
        self.M = M

    def forward(self, x):
        weight = Prune.apply(self.weight, self.N, self.M)
        weight = PruneWrong.apply(weight, self.N, self.M)
        return nn.functional.linear(x, weight, self.bias)


def two_of_four(w):
    return Keep.apply(w, 2, 4)


class Decayed(Function):
    @staticmethod
    def forward(ctx, weight, N, M, decay=2e-4):
        mask = _mask(weight, N, M)
        ctx.save_for_backward(mask)
        return weight * mask

    @staticmethod
    def backward(ctx, g):
        (mask,) = ctx.saved_tensors
        return g * mask, None, None                  # three values for four inputs


def decayed(w):
    return Decayed.apply(w, 1, 4, 1e-3)              # raises: the check must say so
'''


@pytest.fixture(scope="module")
def module(tmp_path_factory):
    path = tmp_path_factory.mktemp("settings") / "nm_ops.py"
    path.write_text(textwrap.dedent(FUNCTIONS))
    result = run_check([Source("file", str(path), "nm_ops.py")], isolate=False)
    spec = importlib.util.spec_from_file_location("nm_ops", path)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded, {r["name"].split("::")[1]: r for r in result.rows}


def _hand_mask(weight, n, m):
    """The n largest magnitudes of each m consecutive entries, found by sorting each group."""
    flat = weight.detach().reshape(-1, m).abs()
    keep = torch.zeros_like(flat)
    for row, group in enumerate(flat):
        for j in sorted(range(m), key=lambda j: -group[j].item())[:n]:
            keep[row, j] = 1.0
    return keep.reshape(weight.shape)


def test_the_settings_come_from_the_layer_and_the_call(module):
    loaded, _ = module
    assert stated_defaults(loaded.Prune, ["weight", "N", "M", "decay"]) == {
        "N": (1, "PrunedLinear's default N"), "M": (4, "PrunedLinear's default M")}
    assert stated_defaults(loaded.Keep, ["weight", "N", "M"]) == {
        "N": (2, "the call in two_of_four()"), "M": (4, "the call in two_of_four()")}


@pytest.mark.parametrize("name, n", [("Prune", 1), ("Keep", 2)])
def test_a_correct_pruning_function_passes_with_the_stated_settings(module, name, n):
    loaded, rows = module
    assert rows[name]["verdict"] == "pass", rows[name]["text"]
    found = synthesize(getattr(loaded, name))
    assert isinstance(found, Synthesized)
    assert found.args[1:] == (n, 4)  # decay is not passed: backward has no slot for it
    weight = found.args[0].detach().clone().requires_grad_()
    got = torch.autograd.grad(getattr(loaded, name).apply(weight, n, 4).sum(), weight)[0]
    mask = _hand_mask(weight, n, 4)
    assert int(mask.sum()) == weight.numel() * n // 4
    torch.testing.assert_close(got, mask)  # d(sum(w * mask))/dw with the mask held fixed


def test_a_backward_that_keeps_the_pruned_weights_fails(module):
    _, rows = module
    row = rows["PruneWrong"]
    assert row["verdict"] == "fail", row["text"]
    assert "gradient-mismatch" in row["text"] and "wrong-grad-count" not in row["text"]


def test_a_call_passing_the_defaulted_argument_still_shows_the_missing_gradient(module):
    loaded, rows = module
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        loaded.decayed(torch.randn(2, 4, dtype=torch.float64, requires_grad=True)).sum().backward()
    row = rows["Decayed"]
    assert row["verdict"] == "fail" and "wrong-grad-count" in row["text"], row["text"]
