"""checkpoint_sequential / CheckpointedSequential against running the same layers plainly."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from gradsmith import GradsmithError
from gradsmith.functional import attention, checkpoint_sequential
from gradsmith.ops._checkpoint import CheckpointedSequential, _split


class Counted(nn.Module):
    """Counts forward calls, to see recomputation happen."""

    def __init__(self, inner):
        super().__init__()
        self.inner, self.calls = inner, 0

    def forward(self, x):
        self.calls += 1
        return self.inner(x)


class SelfAttention(nn.Module):
    def __init__(self, dim, p):
        super().__init__()
        self.qkv, self.p = nn.Linear(dim, 3 * dim), p

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return x + attention(q, k, v, is_causal=True, dropout_p=self.p)


def make_net(seed=0, p=0.3):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 8), nn.Dropout(p), nn.Tanh(), SelfAttention(8, p),
                         nn.Linear(8, 8), nn.Dropout(p), nn.GELU(), nn.Linear(8, 3)).double()


def run(fn, net, x, seed=1):
    """Loss and gradients (parameters, and x if it requires grad) under a fixed RNG seed."""
    net.zero_grad()
    torch.manual_seed(seed)
    out = fn(net, x)
    (out * torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)).sum().backward()
    grads = [p.grad.clone() for p in net.parameters()]
    if x.requires_grad:
        grads.append(x.grad.clone())
        x.grad = None
    return out.detach(), grads


def plain(net, x):
    return net(x)


@pytest.mark.parametrize("segments", [1, 2, 3, 8])
@pytest.mark.parametrize("x_grad", [True, False], ids=["x_grad", "x_nograd"])
def test_values_and_gradients_equal_the_plain_run_with_dropout(segments, x_grad):
    net = make_net()
    x = torch.randn(2, 5, 6, dtype=torch.float64, requires_grad=x_grad)
    want_out, want = run(plain, net, x)
    got_out, got = run(lambda n, x: checkpoint_sequential(n, x, segments), net, x)
    torch.testing.assert_close(got_out, want_out, rtol=0, atol=0)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_without_preserved_rng_state_the_recomputed_masks_differ():
    net = make_net()
    x = torch.randn(2, 5, 6, dtype=torch.float64)
    _, want = run(plain, net, x)
    _, got = run(lambda n, x: checkpoint_sequential(n, x, 2, preserve_rng_state=False), net, x)
    assert not all(torch.allclose(a, b) for a, b in zip(got, want))


@pytest.mark.filterwarnings("ignore:None of the inputs have requires_grad=True:UserWarning")
def test_parameters_get_gradients_when_x_does_not_require_grad_unlike_reentrant():
    net = make_net(p=0.0)
    x = torch.randn(3, 6, dtype=torch.float64)
    checkpoint_sequential(net, x, 2).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in net.parameters())
    net.zero_grad(set_to_none=True)
    # the trap this op avoids: the reentrant checkpoint silently drops parameter gradients
    out = checkpoint(net, x, use_reentrant=True)
    assert not out.requires_grad
    assert all(p.grad is None for p in net.parameters())


def test_tensors_captured_by_closures_get_gradients():
    w = torch.randn(6, 6, dtype=torch.float64, requires_grad=True)
    x = torch.randn(4, 6, dtype=torch.float64)
    layers = [lambda t: t @ w, torch.sin, lambda t: t @ w]
    (got,) = torch.autograd.grad(checkpoint_sequential(layers, x).sum(), (w,))
    (want,) = torch.autograd.grad((torch.sin(x @ w) @ w).sum(), (w,))
    torch.testing.assert_close(got, want)


def test_each_segment_is_recomputed_once_in_backward():
    layers = [Counted(nn.Linear(4, 4)) for _ in range(4)]
    x = torch.randn(3, 4, requires_grad=True)
    out = checkpoint_sequential(layers, x, segments=2)
    assert [m.calls for m in layers] == [1, 1, 1, 1]
    out.sum().backward()
    assert [m.calls for m in layers] == [2, 2, 2, 2]


def test_retain_graph_allows_a_second_backward_with_the_same_gradients():
    net = make_net()
    x = torch.randn(2, 5, 6, dtype=torch.float64)
    torch.manual_seed(3)
    out = checkpoint_sequential(net, x, 3)
    first = torch.autograd.grad(out.sum(), list(net.parameters()), retain_graph=True)
    second = torch.autograd.grad(out.sum(), list(net.parameters()))
    for a, b in zip(first, second):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_autocast_state_is_replayed_in_the_recompute():
    net = make_net(p=0.0).float()
    x = torch.randn(2, 5, 6)

    def under_autocast(fn):
        def call(n, x):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return fn(n, x)
        return call

    want_out, want = run(under_autocast(plain), net, x)
    got_out, got = run(under_autocast(lambda n, x: checkpoint_sequential(n, x, 2)), net, x)
    assert got_out.dtype == torch.bfloat16
    torch.testing.assert_close(got_out, want_out, rtol=0, atol=0)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_no_grad_mode_just_runs_the_layers():
    net = make_net(p=0.0)
    x = torch.randn(2, 6, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(checkpoint_sequential(net, x, 2), net(x))


def test_split_is_balanced_and_ordered():
    assert _split(list(range(7)), 3) == [[0, 1, 2], [3, 4], [5, 6]]
    assert _split(list(range(3)), 3) == [[0], [1], [2]]


def test_checkpointed_sequential_matches_sequential_and_keeps_its_state_dict():
    ref = make_net()
    mod = CheckpointedSequential(*ref, segments=3)
    assert list(mod.state_dict()) == list(ref.state_dict())
    assert "segments=3" in repr(mod)
    x = torch.randn(2, 5, 6, dtype=torch.float64)
    want_out, want = run(plain, ref, x)
    got_out, got = run(plain, mod, x)
    torch.testing.assert_close(got_out, want_out, rtol=0, atol=0)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize("args,match", [
    (([], torch.zeros(1)), "layers must be a non-empty"),
    (([1, 2], torch.zeros(1)), "layers must be a non-empty"),
    ((nn.Linear(2, 2), torch.zeros(1)), "layers must be a non-empty"),
    (([nn.Tanh()], [0.0]), "x must be a torch.Tensor"),
    (([nn.Tanh()], torch.zeros(1), 0), r"segments must be an int in \[1, 1\]"),
    (([nn.Tanh()], torch.zeros(1), 2), r"segments must be an int in \[1, 1\], got 2; at most one segment per layer"),
    (([nn.Tanh()], torch.zeros(1), True), "segments must be an int"),
    (([nn.Tanh()], torch.zeros(1), 1, "yes"), "preserve_rng_state must be True or False"),
], ids=["empty", "not-callable", "module", "x", "seg0", "seg2", "segbool", "rng"])
def test_bad_input(args, match):
    with pytest.raises(GradsmithError, match=match):
        checkpoint_sequential(*args)


def test_bad_module_arguments():
    with pytest.raises(GradsmithError, match=r"segments must be an int in \[1, 2\]"):
        CheckpointedSequential(nn.Tanh(), nn.Tanh(), segments=3)
    with pytest.raises(GradsmithError, match="layers must be a non-empty"):
        CheckpointedSequential(segments=1)


def test_registered_example_passes_gradsmith_check():
    from gradsmith._example import examples_of
    from gradsmith.checker import check

    examples = examples_of(checkpoint_sequential)
    assert examples
    for ex in examples:
        report = check(checkpoint_sequential, *ex.make_args(), **ex.options)
        assert report.passed, str(report)


def test_a_recompute_that_takes_another_path_fails_loudly():
    calls = []

    def flaky(t):
        calls.append(1)
        return t.exp() if len(calls) == 1 else t.exp().sin()  # one more saved tensor on re-run

    x = torch.randn(3, requires_grad=True)
    out = checkpoint_sequential([flaky], x)
    with pytest.raises(RuntimeError, match="must run the same operations"):
        out.sum().backward()


def test_under_torch_compile_segments_run_eagerly_and_match():
    torch.manual_seed(0)
    layers = [torch.nn.Linear(6, 6), torch.nn.ReLU(), torch.nn.Linear(6, 3)]
    x = torch.randn(4, 6)

    def step(fn):
        for p in (q for m in layers for q in m.parameters()):
            p.grad = None
        fn(layers, x, segments=2).sum().backward()
        return [q.grad.clone() for m in layers for q in m.parameters()]

    eager = step(checkpoint_sequential)
    compiled = step(torch.compile(checkpoint_sequential, backend="aot_eager"))
    for a, b in zip(compiled, eager):
        torch.testing.assert_close(a, b)


def test_importing_the_catalog_does_not_import_dynamo():
    # torch.compiler.disable imports torch._dynamo as it decorates: 0.6 s of every
    # `import gradsmith.functional` before the decorator on checkpoint segments was made lazy.
    code = ("import sys, torch, gradsmith.functional, gradsmith.nn\n"
            "print('torch._dynamo' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "False", proc.stdout + proc.stderr
