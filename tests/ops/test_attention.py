"""gradsmith attention against an explicit float64 softmax reference and SDPA.

Small blocks (``block=3``) force the multi-block online-softmax paths on tiny tensors; the public
function (default block) is tested too.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from gradsmith import GradsmithError
from gradsmith.functional import attention
from gradsmith.ops._attention import _AttentionFn
from gradsmith.ops._attention_dropout import keep_mask, row_keys, threshold

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attention_ref import D64, gen, rand, reference, run_blocks  # noqa: E402


def grads(out, inputs, g):
    return torch.autograd.grad(out, inputs, torch.randn(out.shape, generator=g, dtype=out.dtype))


@pytest.mark.parametrize("L,S", [(5, 7), (7, 5), (1, 4), (6, 6)])
@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("with_mask", [False, True], ids=["nomask", "mask"])
@pytest.mark.parametrize("with_bias", [False, True], ids=["nobias", "bias"])
def test_values_and_gradients_match_float64_reference(L, S, is_causal, with_mask, with_bias):
    g = gen(L * 100 + S)
    q, k, v = rand(2, 3, L, 4, g=g), rand(2, 3, S, 4, g=g), rand(2, 3, S, 5, g=g)
    bias = rand(3, L, S, g=g) if with_bias else None
    mask = (torch.rand(L, S, generator=g) > 0.3) if with_mask else None
    inputs = [t for t in (q, k, v, bias) if t is not None]
    for fn in (run_blocks, attention):
        out = fn(q, k, v, mask, bias, is_causal)
        ref = reference(q, k, v, mask, bias, is_causal)
        torch.testing.assert_close(out, ref)
        gout = torch.randn(out.shape, generator=gen(1), dtype=D64)
        got = torch.autograd.grad(out, inputs, gout)
        want = torch.autograd.grad(ref, inputs, gout)
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b)


def test_matches_sdpa_float32_with_bool_mask_and_causal_top_left():
    g = gen(2)
    q, k, v = (rand(2, 4, n, 16, g=g, dtype=torch.float32) for n in (9, 13, 13))
    mask = torch.rand(2, 1, 9, 13, generator=g) > 0.2
    mask[..., 0] = True  # SDPA returns NaN on fully masked rows; keep them out of this test
    for kwargs in ({"mask": mask}, {"is_causal": True}):
        out = attention(q, k, v, **kwargs)
        ref = F.scaled_dot_product_attention(q, k, v, attn_mask=kwargs.get("mask"),
                                             is_causal=kwargs.get("is_causal", False))
        torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-4)
        got, want = grads(out, (q, k, v), gen(3)), grads(ref, (q, k, v), gen(3))
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_fully_masked_rows_give_zero_output_and_zero_gradient():
    g = gen(4)
    q, k, v = rand(1, 4, 3, g=g), rand(1, 6, 3, g=g), rand(1, 6, 3, g=g)
    mask = torch.ones(4, 6, dtype=torch.bool)
    mask[2] = False
    out = run_blocks(q, k, v, mask)
    assert torch.equal(out[0, 2], torch.zeros(3, dtype=D64))
    dq, dk, dv = torch.autograd.grad(out.sum(), (q, k, v))
    assert torch.isfinite(dq).all() and torch.isfinite(dk).all() and torch.isfinite(dv).all()
    assert torch.equal(dq[0, 2], torch.zeros(3, dtype=D64))
    torch.testing.assert_close(out, reference(q, k, v, mask))


@pytest.mark.parametrize("shape", [(3, 5, 7), (5, 7), (1, 1, 5, 7), (2, 1, 1, 7), (3, 5, 1),
                                   (7,)], ids=str)
def test_bias_gradient_is_reduced_to_the_bias_shape(shape):
    g = gen(5)
    q, k, v = rand(2, 3, 5, 4, g=g), rand(2, 3, 7, 4, g=g), rand(2, 3, 7, 4, g=g)
    bias = rand(*shape, g=g)
    for causal in (False, True):
        out = run_blocks(q, k, v, bias=bias, is_causal=causal)
        (got,) = grads(out, (bias,), gen(6))
        (want,) = grads(reference(q, k, v, bias=bias, is_causal=causal), (bias,), gen(6))
        assert got.shape == bias.shape
        torch.testing.assert_close(got, want)


def test_alibi_slopes_get_their_gradient_through_the_bias():
    g = gen(7)
    H, L = 4, 6
    q, k, v = rand(2, H, L, 4, g=g), rand(2, H, L, 4, g=g), rand(2, H, L, 4, g=g)
    slopes = torch.tensor([0.5, 0.25, 0.125, 0.0625], dtype=D64, requires_grad=True)
    pos = torch.arange(L, dtype=D64)
    distance = (pos[None, :] - pos[:, None]).abs()

    def alibi(s):
        return -s[:, None, None] * distance

    got = grads(run_blocks(q, k, v, bias=alibi(slopes), is_causal=True), (slopes,), gen(8))
    want = grads(reference(q, k, v, bias=alibi(slopes), is_causal=True), (slopes,), gen(8))
    torch.testing.assert_close(got[0], want[0])


def test_saves_no_length_by_length_tensor():
    g = gen(9)
    L = S = 64
    q, k, v = rand(2, 2, L, 8, g=g), rand(2, 2, S, 8, g=g), rand(2, 2, S, 8, g=g)
    shapes = []

    def pack(t):
        shapes.append(tuple(t.shape))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        attention(q, k, v, is_causal=True, dropout_p=0.1, generator=gen(0))
    assert shapes, "nothing was saved"
    assert all(math.prod(s) < L * S * 2 or s[-1] == 8 for s in shapes), shapes
    assert (2, 2, L) in shapes  # the row logsumexp


# --- dropout ---------------------------------------------------------------------------------

def full_keep(seed_gen_seed, batch_shape, L, S, p, offset=0):
    seed = torch.randint(0, 2**32, (), generator=gen(seed_gen_seed), dtype=torch.int64)
    keys = row_keys(seed, batch_shape, L, offset, torch.device("cpu"))
    return keep_mask(keys, 0, S, threshold(p))


def test_dropout_matches_reference_with_the_same_mask_in_forward_and_backward():
    g = gen(10)
    p = 0.3
    q, k, v = rand(2, 3, 9, 4, g=g), rand(2, 3, 11, 4, g=g), rand(2, 3, 11, 5, g=g)
    bias = rand(3, 9, 11, g=g)
    keep = full_keep(123, (2, 3), 9, 11, p)
    ref = reference(q, k, v, bias=bias, is_causal=True, keep=keep, p=p)
    out = attention(q, k, v, bias=bias, is_causal=True, dropout_p=p, generator=gen(123))
    torch.testing.assert_close(out, ref)
    want = grads(ref, (q, k, v, bias), gen(11))
    got = grads(out, (q, k, v, bias), gen(11))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
    # many blocks regenerate the same mask as one block
    seed = torch.randint(0, 2**32, (), generator=gen(123), dtype=torch.int64)
    small = _AttentionFn.apply(q, k, v, None, bias, None, seed, True, 0.5, p, 0, 2, False)[0]
    torch.testing.assert_close(small, ref)


def test_dropout_is_reproducible_with_a_generator_and_random_without():
    g = gen(12)
    q, k, v = rand(2, 16, 8, g=g), rand(2, 16, 8, g=g), rand(2, 16, 8, g=g)
    a = attention(q, k, v, dropout_p=0.5, generator=gen(1))
    b = attention(q, k, v, dropout_p=0.5, generator=gen(1))
    c = attention(q, k, v, dropout_p=0.5, generator=gen(2))
    assert torch.equal(a, b)
    assert not torch.allclose(a, c)


def test_dropout_keep_rate_and_independence():
    keep = full_keep(0, (4, 4), 128, 128, 0.2).double()
    assert abs(keep.mean().item() - 0.8) < 0.005
    # neighbouring rows and columns are uncorrelated
    for a, b in ((keep[..., 1:, :], keep[..., :-1, :]), (keep[..., 1:], keep[..., :-1])):
        corr = torch.corrcoef(torch.stack([a.flatten(), b.flatten()]))[0, 1]
        assert abs(corr.item()) < 0.02


def test_dropout_batch_offset_reproduces_the_global_batch_masks():
    full = full_keep(5, (4, 2), 6, 6, 0.5)
    second_half = full_keep(5, (2, 2), 6, 6, 0.5, offset=2)
    assert torch.equal(second_half, full[2:])


# --- transforms ------------------------------------------------------------------------------

def test_vmap_matches_a_loop_values_and_gradients():
    g = gen(13)
    q, k, v = rand(3, 2, 5, 4, g=g), rand(3, 2, 7, 4, g=g), rand(3, 2, 7, 4, g=g)
    bias = rand(3, 5, 7, g=g)

    def f(q, k, v, b):
        return attention(q, k, v, bias=b, is_causal=True)

    out = torch.func.vmap(f)(q, k, v, bias)
    torch.testing.assert_close(out, torch.stack([f(*xs) for xs in zip(q, k, v, bias)]))

    def loss(q, k, v, b):
        return (f(q, k, v, b) ** 2).sum()

    got = torch.func.vmap(torch.func.grad(loss, argnums=(0, 1, 2, 3)))(q, k, v, bias)
    for i, want in enumerate(zip(*[torch.func.grad(loss, argnums=(0, 1, 2, 3))(*xs)
                                   for xs in zip(q, k, v, bias)])):
        torch.testing.assert_close(got[i], torch.stack(want))


def test_vmap_over_queries_only():
    g = gen(14)
    q, k, v = rand(4, 5, 3, g=g), rand(6, 3, g=g), rand(6, 2, g=g)
    out = torch.func.vmap(attention, in_dims=(0, None, None))(q, k, v)
    torch.testing.assert_close(out, torch.stack([attention(x, k, v) for x in q]))


# torch's dynamo instantiates the Function base class while tracing any autograd.Function and
# triggers its own deprecation warning; that is not ours to fix.
@pytest.mark.filterwarnings("ignore:.*should not be instantiated:DeprecationWarning")
def test_torch_compile_fullgraph_matches_eager():
    torch._dynamo.reset()
    g = gen(15)
    q, k, v = (rand(2, 2, n, 4, g=g, dtype=torch.float32) for n in (5, 7, 7))
    mask = torch.rand(5, 7, generator=g) > 0.3

    def f(q, k, v):
        return attention(q, k, v, mask=mask, is_causal=True)

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    out = compiled(q, k, v)
    torch.testing.assert_close(out, f(q, k, v))
    got, want = grads(out, (q, k, v), gen(16)), grads(f(q, k, v), (q, k, v), gen(16))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)


def test_autocast_bfloat16_runs_and_stays_close():
    g = gen(17)
    q, k, v = (rand(2, 2, 32, 16, g=g, dtype=torch.float32) for _ in range(3))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = attention(q, k, v, is_causal=True)
    assert out.dtype == torch.bfloat16
    ref = reference(*(t.double() for t in (q, k, v)), is_causal=True)
    torch.testing.assert_close(out.double(), ref, atol=3e-2, rtol=3e-2)
    dq, dk, dv = torch.autograd.grad(out.float().sum(), (q, k, v))
    want = torch.autograd.grad(ref.sum(), (q, k, v))
    assert dq.dtype == torch.float32
    for a, b in zip((dq, dk, dv), want):
        torch.testing.assert_close(a.double(), b.double(), atol=5e-2, rtol=5e-2)


def test_double_backward_raises_instead_of_being_wrong():
    g = gen(18)
    q, k, v = rand(4, 3, g=g), rand(4, 3, g=g), rand(4, 3, g=g)
    (dq,) = torch.autograd.grad(attention(q, k, v).sum(), (q,), create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable|does not require grad"):
        dq.sum().backward()


# --- fused kernel path ------------------------------------------------------------------------

def run_path(q, k, v, is_causal, scale, fused):
    return _AttentionFn.apply(q, k, v, None, None, None, None, is_causal, scale, 0.0, 0, 3,
                              fused)[0]


@pytest.mark.parametrize("L,S", [(5, 7), (7, 5), (1, 4), (6, 6)])
@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("scale", [None, 0.3])
def test_fused_and_blockwise_paths_agree_float64(L, S, is_causal, scale):
    g = gen(L * 10 + S)
    q, k, v = rand(2, 3, L, 4, g=g), rand(2, 3, S, 4, g=g), rand(2, 3, S, 4, g=g)
    ref = reference(q, k, v, is_causal=is_causal, scale=scale)
    scale = 0.5 if scale is None else scale
    ref = reference(q, k, v, is_causal=is_causal, scale=scale)
    fused, blocks = run_path(q, k, v, is_causal, scale, True), run_path(q, k, v, is_causal,
                                                                          scale, False)
    torch.testing.assert_close(fused, blocks)
    torch.testing.assert_close(fused, ref)
    got_f, got_b, want = (grads(o, (q, k, v), gen(5)) for o in (fused, blocks, ref))
    for a, b, c in zip(got_f, got_b, want):
        torch.testing.assert_close(a, b)
        torch.testing.assert_close(a, c)


@pytest.mark.parametrize("layout", ["heads-transposed", "column-major", "expanded"])
def test_fused_path_handles_strided_inputs_and_expanded_gradients(layout):
    # The raw aten kernel is silently wrong for a last-dim stride != 1 (column-major).
    g = gen(30)
    if layout == "heads-transposed":
        qkv = [torch.randn(2, 6, 3, 4, generator=g, dtype=D64).transpose(1, 2) for _ in range(3)]
    elif layout == "column-major":
        qkv = [torch.randn(2, 3, 4, 6, generator=g, dtype=D64).transpose(-1, -2)
               for _ in range(3)]
    else:
        qkv = [torch.randn(1, 3, 6, 4, generator=g, dtype=D64).expand(2, 3, 6, 4)
               for _ in range(3)]
    q, k, v = (t.requires_grad_() for t in qkv)
    out = attention(q, k, v)  # 4-d, no mask: fused; .sum() sends an expanded (stride 0) grad
    ref = reference(q, k, v)
    torch.testing.assert_close(out, ref)
    got, want = torch.autograd.grad(out.sum(), (q, k, v)), torch.autograd.grad(ref.sum(), (q, k, v))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)


def _q4(dtype=torch.float32, dv=8):
    return torch.zeros(2, 3, 5, 8, dtype=dtype), torch.zeros(2, 3, 5, dv, dtype=dtype)


@pytest.mark.parametrize("change,expected", [
    ({}, True),
    ({"dtype": D64}, True),
    ({"dtype": torch.bfloat16}, False),  # autocast: our path's fp32-statistics numerics
    ({"dtype": torch.float16}, False),
    ({"dv": 6}, False),  # the kernel needs v's feature size == d
    ({"rank": 3}, False),  # the kernel takes only (B, H, L, d)
    ({"mask": True}, False),  # fully masked rows: our zeros vs the kernel's float mask
    ({"bias": True}, False),
    ({"dropout_p": 0.1}, False),  # counter-based dropout masks the kernel cannot replay
    ({"empty": 0}, False),  # the kernel dies with SIGFPE on empty dims
    ({"empty": 1}, False),
    ({"empty": 3}, False),
], ids=str)
def test_use_fused_decides_the_path(change, expected):
    from gradsmith.ops._attention_fused import use_fused

    q, v = _q4(change.get("dtype", torch.float32), change.get("dv", 8))
    if change.get("rank") == 3:
        q, v = q[0], v[0]
    if "empty" in change:
        q, v = q.narrow(change["empty"], 0, 0), v.narrow(change["empty"], 0, 0)
    mask = torch.ones(5, 5, dtype=torch.bool) if change.get("mask") else None
    bias = torch.zeros(5, 5) if change.get("bias") else None
    assert use_fused(q, q, v, mask, bias, change.get("dropout_p", 0.0)) is expected


@pytest.mark.parametrize("shape", [(0, 2, 5, 4), (2, 0, 5, 4)], ids=str)
def test_empty_batch_or_heads_give_empty_output_and_gradients(shape):
    q = torch.randn(shape, dtype=D64, requires_grad=True)
    out = attention(q, q, q)
    out.sum().backward()
    assert out.shape == shape and q.grad.shape == shape


def test_use_fused_is_false_under_vmap():
    from gradsmith.ops._attention_fused import use_fused

    seen = []

    def f(q):
        seen.append(use_fused(q, q, q, None, None, 0.0))
        return q

    torch.func.vmap(f)(torch.zeros(2, 2, 3, 5, 4))
    assert seen == [False]


@pytest.mark.parametrize("kwargs,expected", [
    ({}, True), ({"is_causal": True}, True), ({"mask": True}, False), ({"dropout_p": 0.2}, False),
], ids=str)
def test_attention_calls_the_fused_kernel_exactly_when_it_applies(monkeypatch, kwargs, expected):
    import gradsmith.ops._attention as module

    calls = []
    real_forward, real_backward = module.fused_forward, module.fused_backward
    monkeypatch.setattr(module, "fused_forward", lambda *a: calls.append("f") or real_forward(*a))
    monkeypatch.setattr(module, "fused_backward",
                        lambda *a: calls.append("b") or real_backward(*a))
    g = gen(31)
    q, k, v = (rand(2, 2, 6, 4, g=g) for _ in range(3))
    if kwargs.get("mask"):
        kwargs = {"mask": torch.rand(6, 6, generator=g) > 0.3}
    attention(q, k, v, **kwargs).sum().backward()
    assert calls == (["f", "b"] if expected else [])


def test_fused_path_saves_the_same_tensors_as_the_blockwise_path():
    g = gen(32)
    q, k, v = (rand(2, 2, 64, 8, g=g, dtype=torch.float32) for _ in range(3))
    saved = {}
    for fused in (True, False):
        saved[fused] = []

        def pack(t, sink=saved[fused]):
            sink.append((tuple(t.shape), t.dtype))
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            run_path(q, k, v, True, 0.3, fused)
    assert sorted(saved[True]) == sorted(saved[False])
    assert ((2, 2, 64), torch.float32) in saved[True]  # the row logsumexp, O(L)


def test_vmap_and_func_grad_over_fused_shapes_match_the_fused_path():
    g = gen(33)
    q, k, v = (rand(3, 2, 2, 5, 4, g=g) for _ in range(3))

    def loss(q, k, v):
        return (attention(q, k, v, is_causal=True) ** 2).sum()

    got = torch.func.vmap(torch.func.grad(loss, argnums=(0, 1, 2)))(q, k, v)
    for i, want in enumerate(zip(*[torch.autograd.grad(loss(*xs), xs)
                                   for xs in zip(q, k, v)])):
        torch.testing.assert_close(got[i], torch.stack(want))


@pytest.mark.filterwarnings("ignore:.*should not be instantiated:DeprecationWarning")
def test_torch_compile_fullgraph_on_the_fused_path_matches_eager():
    torch._dynamo.reset()
    g = gen(34)
    q, k, v = (rand(2, 2, n, 8, g=g, dtype=torch.float32) for n in (5, 7, 7))

    def f(q, k, v):
        return attention(q, k, v, is_causal=True)

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    out = compiled(q, k, v)
    ref = reference(*(t.double() for t in (q, k, v)), is_causal=True)
    torch.testing.assert_close(out, ref.float(), atol=1e-5, rtol=1e-4)
    got, want = grads(out, (q, k, v), gen(35)), grads(f(q, k, v), (q, k, v), gen(35))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)


# --- bad input -------------------------------------------------------------------------------

def _qkv():
    return torch.randn(2, 4, 3), torch.randn(2, 5, 3), torch.randn(2, 5, 6)


@pytest.mark.parametrize("change,match", [
    (lambda q, k, v: (q, k[:, :, :2], v), "same feature size"),
    (lambda q, k, v: (q, k, v[:, :4]), "k and v must have the same length"),
    (lambda q, k, v: (q[:1], k, v), "same batch dims"),
    (lambda q, k, v: (q.double(), k, v), "share a dtype"),
    (lambda q, k, v: (q[0, 0], k, v), "at least 2 dims"),
    (lambda q, k, v: (q.long(), k, v), "floating-point"),
    (lambda q, k, v: ([1.0], k, v), "torch.Tensor"),
    (lambda q, k, v: (q[:, :0], k, v), "q must have a non-empty length dim"),
    (lambda q, k, v: (q, k[:, :0], v[:, :0]), "k must have a non-empty length dim"),
    (lambda q, k, v: (q[..., :0], k[..., :0], v), "non-empty feature dim"),
], ids=["d", "S", "batch", "dtype", "ndim", "int", "list", "L=0", "S=0", "d=0"])
def test_bad_qkv(change, match):
    with pytest.raises(GradsmithError, match=match):
        attention(*change(*_qkv()))


@pytest.mark.parametrize("kwargs,match", [
    ({"mask": torch.ones(4, 5)}, "mask must be a bool tensor"),
    ({"mask": torch.ones(3, 5, dtype=torch.bool)}, r"mask must broadcast .* \(2, 4, 5\)"),
    ({"mask": torch.ones(3, 2, 4, 5, dtype=torch.bool)}, "mask must broadcast"),
    ({"bias": torch.ones(4, 6)}, "bias must broadcast"),
    ({"bias": torch.ones(4, 5, dtype=torch.int64)}, "bias must be a floating-point"),
    ({"scale": 0.0}, "scale must be > 0"),
    ({"scale": -1.0}, "scale must be > 0"),
    ({"dropout_p": 1.0}, r"dropout_p must be in \[0, 1\)"),
    ({"dropout_p": -0.1}, r"dropout_p must be in \[0, 1\)"),
    ({"is_causal": 1}, "is_causal must be True or False"),
    ({"generator": 3}, "generator must be a torch.Generator"),
    ({"dropout_batch_offset": -1}, "dropout_batch_offset must be an int"),
], ids=lambda x: x if isinstance(x, str) else None)
def test_bad_options(kwargs, match):
    with pytest.raises(GradsmithError, match=match):
        attention(*_qkv(), **kwargs)


@pytest.mark.parametrize("name", ["plain", "mask+bias+causal, L != S", "dropout",
                                  "fused kernel: 4-d, causal, L != S"])
def test_registered_examples_pass_gradsmith_check(name):
    from gradsmith._example import examples_of
    from gradsmith.checker import check

    (ex,) = [e for e in examples_of(attention) if e.name == name]
    report = check(attention, *ex.make_args(), **ex.options)
    assert report.passed, str(report)


# --- Attention module ------------------------------------------------------------------------

@pytest.mark.parametrize("batch_first", [True, False])
def test_module_matches_nn_multihead_attention_with_its_state_dict(batch_first):
    from gradsmith.nn import Attention

    torch.manual_seed(19)
    ref = torch.nn.MultiheadAttention(16, 4, batch_first=batch_first).double()
    mod = Attention(16, 4, batch_first=batch_first).double()
    mod.load_state_dict(ref.state_dict())
    shape = (2, 5, 16) if batch_first else (5, 2, 16)
    kv_shape = (2, 7, 16) if batch_first else (7, 2, 16)
    x = torch.randn(shape, dtype=D64, requires_grad=True)
    kv = torch.randn(kv_shape, dtype=D64)
    keep = torch.rand(5, 7, generator=gen(20)) > 0.3
    keep[:, 0] = True
    out = mod(x, kv, kv, mask=keep)
    want, _ = ref(x, kv, kv, attn_mask=~keep, need_weights=False)
    torch.testing.assert_close(out, want)
    got_g = torch.autograd.grad(out.sum(), [x, *mod.parameters()])
    want_g = torch.autograd.grad(want.sum(), [x, *ref.parameters()])
    for a, b in zip(got_g, want_g):
        torch.testing.assert_close(a, b)


def test_module_dropout_only_in_training_and_repr():
    from gradsmith.nn import Attention

    mod = Attention(8, 2, dropout=0.5, batch_first=True)
    assert repr(mod) == "Attention(embed_dim=8, num_heads=2, dropout=0.5, bias=True, " \
                        "batch_first=True)"
    x = torch.randn(2, 6, 8)
    a, b = mod(x, generator=gen(0)), mod(x, generator=gen(1))
    assert not torch.allclose(a, b)
    mod.eval()
    torch.testing.assert_close(mod(x, generator=gen(0)), mod(x, generator=gen(1)))


@pytest.mark.parametrize("kwargs,match", [
    ({"embed_dim": 10, "num_heads": 4}, "embed_dim must be divisible by num_heads"),
    ({"embed_dim": 8, "num_heads": 0}, "num_heads must be an int"),
    ({"embed_dim": 8, "num_heads": 2, "dropout": 1.0}, r"dropout_p must be in \[0, 1\)"),
    ({"embed_dim": 8, "num_heads": 2, "batch_first": "yes"}, "batch_first must be True"),
])
def test_module_bad_arguments(kwargs, match):
    from gradsmith.nn import Attention

    with pytest.raises(GradsmithError, match=match):
        Attention(**kwargs)


def test_module_bad_input_rank():
    from gradsmith.nn import Attention

    with pytest.raises(GradsmithError, match=r"query must be a 3-d tensor \(B, L, E\)"):
        Attention(8, 2, batch_first=True)(torch.randn(6, 8))


@pytest.mark.parametrize("bias_shape", [(4, 16, 24), (2, 4, 16, 24), (16, 24), (1, 16, 24),
                                        (4, 1, 24)])
def test_dense_bias_gradient_matches_sdpa_for_every_reduction_path(bias_shape):
    # (..., L, S) of the scores' trailing shape: reduced in place into one buffer per block;
    # broadcast shapes (size-1 dims): reduced per tile and assembled
    g = torch.Generator().manual_seed(7)
    q = torch.randn(2, 4, 16, 8, generator=g, dtype=torch.float64, requires_grad=True)
    k, v = (torch.randn(2, 4, 24, 8, generator=g, dtype=torch.float64, requires_grad=True)
            for _ in range(2))
    bias = torch.randn(bias_shape, generator=g, dtype=torch.float64, requires_grad=True)
    from gradsmith.ops._attention import _AttentionFn

    out = _AttentionFn.apply(q, k, v, None, bias, None, None, False, 8 ** -0.5, 0.0, 0, 8,
                             False)[0]  # key blocks of 8: three blocks
    got = torch.autograd.grad(out.sum(), (q, k, v, bias))
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    expected = torch.autograd.grad(ref.sum(), (q, k, v, bias))
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b)
