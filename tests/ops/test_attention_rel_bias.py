"""attention(rel_bias=...): the compact (..., L + S - 1) relative position bias.

Every reference builds the dense (..., L, S) bias by gathering ``rel[..., j - i + L - 1]`` with
plain indexing and runs a float64 softmax (or SDPA, or this op's own dense ``bias`` path), so
values and gradients (through autograd of the gather) are checked independently of the skewed
table the kernels use. ``block=3`` forces many key blocks, a partial last block and causal row
skipping on tiny tensors.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from gradsmith import GradsmithError
from gradsmith.functional import attention
from gradsmith.ops._attention_rel import rel_grad, rel_table, zeros_grad_table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attention_ref import D64, gen, rand, reference, run_blocks  # noqa: E402


def dense_of(rel, L, S):
    """The (..., L, S) bias that ``rel`` stands for: entry (i, j) = rel[..., j - i + L - 1]."""
    return rel[..., torch.arange(S) - torch.arange(L)[:, None] + L - 1]




def assert_grads_match(out, ref, inputs, seed):
    gout = torch.randn(out.shape, generator=gen(seed), dtype=out.dtype)
    got = torch.autograd.grad(out, inputs, gout)
    want = torch.autograd.grad(ref, inputs, gout, retain_graph=True)
    for a, b in zip(got, want):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("L,S", [(5, 7), (7, 5), (1, 4), (6, 6)])
@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("with_mask", [False, True], ids=["nomask", "mask"])
@pytest.mark.parametrize("rel_shape", ["H", "shared", "BH", "B1"])
def test_values_and_gradients_match_the_gathered_dense_reference(L, S, is_causal, with_mask,
                                                                 rel_shape):
    g = gen(L * 100 + S)
    B, H, N = 2, 3, L + S - 1
    q, k, v = rand(B, H, L, 4, g=g), rand(B, H, S, 4, g=g), rand(B, H, S, 5, g=g)
    rel = rand(*{"H": (H, N), "shared": (N,), "BH": (B, H, N), "B1": (B, 1, N)}[rel_shape], g=g)
    mask = None
    if with_mask:
        mask = torch.rand(L, S, generator=g) > 0.3
        mask[L // 2] = False  # a fully masked row: output 0, gradient 0
    ref = reference(q, k, v, mask, dense_of(rel, L, S), is_causal)
    for out in (run_blocks(q, k, v, mask, rel=rel, is_causal=is_causal),
                attention(q, k, v, mask, is_causal=is_causal, rel_bias=rel)):
        torch.testing.assert_close(out, ref)
        assert_grads_match(out, ref, (q, k, v, rel), seed=1)


@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
def test_combines_with_a_dense_bias_and_a_scale(is_causal):
    g = gen(3)
    L, S = 7, 10
    q, k, v = rand(2, 2, L, 4, g=g), rand(2, 2, S, 4, g=g), rand(2, 2, S, 3, g=g)
    bias, rel = rand(2, L, S, g=g), rand(2, L + S - 1, g=g)
    ref = reference(q, k, v, bias=bias + dense_of(rel, L, S), is_causal=is_causal, scale=0.3)
    for block in (3, 4, 256):
        out = run_blocks(q, k, v, bias=bias, rel=rel, is_causal=is_causal, scale=0.3,
                         block=block)
        torch.testing.assert_close(out, ref)
        assert_grads_match(out, ref, (q, k, v, bias, rel), seed=4)


def test_default_block_several_key_blocks_match_reference():
    g = gen(5)
    L, S = 300, 530  # three key blocks of 256, the last one partial
    q, k, v = rand(1, 2, L, 8, g=g), rand(1, 2, S, 8, g=g), rand(1, 2, S, 8, g=g)
    rel = rand(2, L + S - 1, g=g)
    for causal in (False, True):
        out = attention(q, k, v, is_causal=causal, rel_bias=rel)
        ref = reference(q, k, v, bias=dense_of(rel, L, S), is_causal=causal)
        torch.testing.assert_close(out, ref)
        assert_grads_match(out, ref, (q, k, v, rel), seed=6)


def test_matches_sdpa_float32_with_the_dense_bias():
    g = gen(7)
    L, S = 33, 45
    q, k, v = (rand(2, 4, n, 16, g=g, dtype=torch.float32) for n in (L, S, S))
    rel = rand(4, L + S - 1, g=g, dtype=torch.float32)
    out = attention(q, k, v, rel_bias=rel)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=dense_of(rel, L, S))
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-4)
    gout = torch.randn(out.shape, generator=gen(8))
    got = torch.autograd.grad(out, (q, k, v, rel), gout)
    want = torch.autograd.grad(ref, (q, k, v, rel), gout)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


def test_alibi_slopes_and_t5_table_get_their_gradient_by_autograd():
    g = gen(9)
    H, L, S = 4, 6, 9
    q, k, v = rand(2, H, L, 4, g=g), rand(2, H, S, 4, g=g), rand(2, H, S, 4, g=g)
    slopes = torch.tensor([0.5, 0.25, 0.125, 0.0625], dtype=D64, requires_grad=True)
    table = rand(H, 8, g=g)
    offsets = torch.arange(L + S - 1) - (L - 1)
    bucket = offsets.clamp(-4, 3) + 4
    cases = [(slopes, lambda: -slopes[:, None] * offsets.abs(), True),
             (table, lambda: table[:, bucket], False)]
    for leaf, build, causal in cases:
        out = run_blocks(q, k, v, rel=build(), is_causal=causal)
        ref = reference(q, k, v, bias=dense_of(build(), L, S), is_causal=causal)
        assert_grads_match(out, ref, (leaf,), seed=10)


def test_dropout_equals_the_dense_bias_path_with_the_same_seed():
    g = gen(11)
    L, S, p = 9, 11, 0.3
    q, k, v = rand(2, 3, L, 4, g=g), rand(2, 3, S, 4, g=g), rand(2, 3, S, 5, g=g)
    rel = rand(3, L + S - 1, g=g)
    out = attention(q, k, v, is_causal=True, dropout_p=p, generator=gen(123), rel_bias=rel)
    ref = attention(q, k, v, bias=dense_of(rel, L, S), is_causal=True, dropout_p=p,
                    generator=gen(123))
    torch.testing.assert_close(out, ref)
    assert_grads_match(out, ref, (q, k, v, rel), seed=12)
    no_dropout = attention(q, k, v, is_causal=True, rel_bias=rel)
    assert not torch.allclose(out, no_dropout)  # dropout did act


# --- transforms ------------------------------------------------------------------------------

@pytest.mark.parametrize("rel_batched", [True, False], ids=["rel-batched", "rel-shared"])
def test_vmap_matches_the_dense_reference_values_and_gradients(rel_batched):
    g = gen(13)
    L, S = 5, 7
    q, k, v = rand(3, 2, L, 4, g=g), rand(3, 2, S, 4, g=g), rand(3, 2, S, 4, g=g)
    rel = rand(3, 2, L + S - 1, g=g) if rel_batched else rand(2, L + S - 1, g=g)
    dims = (0, 0, 0, 0 if rel_batched else None)

    def loss(q, k, v, r):
        return (run_blocks(q, k, v, rel=r, is_causal=True) ** 2).sum()

    out = torch.func.vmap(lambda *xs: run_blocks(*xs[:3], rel=xs[3], is_causal=True),
                          in_dims=dims)(q, k, v, rel)
    got = torch.func.vmap(torch.func.grad(loss, argnums=(0, 1, 2, 3)), in_dims=dims)(q, k, v, rel)
    # plain autograd through the dense (gathered) bias, one sample at a time
    rels = rel if rel_batched else [rel] * 3
    for b, xs in enumerate(zip(q, k, v, rels)):
        leaves = [x.detach().clone().requires_grad_() for x in xs]
        ref = reference(*leaves[:3], bias=dense_of(leaves[3], L, S), is_causal=True)
        torch.testing.assert_close(out[b], ref)
        want = torch.autograd.grad((ref ** 2).sum(), leaves)
        for i in range(4):
            torch.testing.assert_close(got[i][b], want[i])


# torch's dynamo instantiates the Function base class while tracing any autograd.Function and
# triggers its own deprecation warning; that is not ours to fix.
@pytest.mark.filterwarnings("ignore:.*should not be instantiated:DeprecationWarning")
def test_torch_compile_fullgraph_matches_eager():
    torch._dynamo.reset()
    g = gen(15)
    L, S = 5, 7
    q, k, v = (rand(2, 2, n, 4, g=g, dtype=torch.float32) for n in (L, S, S))
    rel = rand(2, L + S - 1, g=g, dtype=torch.float32)
    mask = torch.rand(L, S, generator=g) > 0.3

    def f(q, k, v, rel):
        return attention(q, k, v, mask=mask, is_causal=True, rel_bias=rel)

    out = torch.compile(f, fullgraph=True, backend="aot_eager")(q, k, v, rel)
    eager = f(q, k, v, rel)
    torch.testing.assert_close(out, eager)
    assert_grads_match(out, eager, (q, k, v, rel), seed=16)


def test_autocast_bfloat16_runs_and_stays_close():
    g = gen(17)
    L = 32
    q, k, v = (rand(2, 2, L, 16, g=g, dtype=torch.float32) for _ in range(3))
    rel = rand(2, 2 * L - 1, g=g, dtype=torch.float32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = attention(q, k, v, is_causal=True, rel_bias=rel)
    assert out.dtype == torch.bfloat16
    inputs64 = [t.detach().double().requires_grad_() for t in (q, k, v, rel)]
    ref = reference(*inputs64[:3], bias=dense_of(inputs64[3], L, L), is_causal=True)
    torch.testing.assert_close(out.double(), ref, atol=3e-2, rtol=3e-2)
    got = torch.autograd.grad(out.float().sum(), (q, k, v, rel))
    want = torch.autograd.grad(ref.sum(), inputs64)
    assert got[3].dtype == torch.float32
    for a, b in zip(got, want):
        torch.testing.assert_close(a.double(), b, atol=5e-2, rtol=5e-2)


@pytest.mark.parametrize("shape,rel_shape", [((0, 2, 5, 4), (2, 9)), ((2, 0, 5, 4), (0, 9))],
                         ids=["no-batch", "no-heads"])
def test_empty_batch_or_heads_give_empty_output_and_zero_rel_gradient(shape, rel_shape):
    g = gen(22)
    q, k, v = rand(*shape, g=g), rand(*shape, g=g), rand(*shape, g=g)
    rel = rand(*rel_shape, g=g)
    out = attention(q, k, v, is_causal=True, rel_bias=rel)
    assert out.shape == shape
    (drel,) = torch.autograd.grad(out.sum(), rel)
    assert torch.equal(drel, torch.zeros(rel_shape, dtype=D64))


# --- memory ----------------------------------------------------------------------------------

def test_saves_rel_bias_itself_and_nothing_of_size_l_times_s():
    g = gen(18)
    B, H, L, S = 2, 2, 64, 48
    q, k, v = rand(B, H, L, 8, g=g), rand(B, H, S, 8, g=g), rand(B, H, S, 8, g=g)
    rel = rand(H, L + S - 1, g=g)
    saved = []

    def pack(t):
        saved.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = attention(q, k, v, is_causal=True, rel_bias=rel)
    assert out.grad_fn is not None
    assert saved, "nothing was saved"
    assert all(t.numel() < L * S for t in saved), [tuple(t.shape) for t in saved]
    assert any(t is rel for t in saved)  # the compact bias itself, not a dense copy


def test_rel_table_and_its_fold_against_autograd():
    g = gen(19)
    rel = rand(2, 3, 9, g=g)
    for width in (1, 4, 9):
        table = rel_table(rel, width, D64)
        assert table.shape == (2, 3, 9, width)
        n = torch.arange(9)
        want = torch.nn.functional.pad(rel, (0, width - 1))[..., 8 - n[:, None] + torch.arange(
            width)]
        torch.testing.assert_close(table, want)
        up = torch.randn(table.shape, generator=gen(width), dtype=D64)
        (ref,) = torch.autograd.grad(want, rel, up)
        dtable = zeros_grad_table(table)
        dtable[..., :9, :] = up
        for strided in (True, False):
            torch.testing.assert_close(rel_grad(dtable, 9, strided), ref)


# --- bad input -------------------------------------------------------------------------------

def _qkv():  # q (2, 4, 3), k/v (2, 5, .): L + S - 1 = 8
    return torch.randn(2, 4, 3), torch.randn(2, 5, 3), torch.randn(2, 5, 6)


@pytest.mark.parametrize("rel,match", [
    ([0.0] * 8, r"rel_bias must be a torch.Tensor, got list"),
    (torch.zeros(8, dtype=torch.int64), r"rel_bias must be a floating-point tensor, got dtype "
                                        r"torch.int64"),
    (torch.zeros(8, device="meta"), r"rel_bias is on the meta device \(a shape without data\)"),
    (torch.zeros(9), r"rel_bias must have last dim L \+ S - 1 = 4 \+ 5 - 1 = 8 .* got shape "
                     r"\(9,\)"),
    (torch.zeros(5, 4), r"rel_bias must have last dim L \+ S - 1 = 4 \+ 5 - 1 = 8"),
    (torch.tensor(1.0), r"rel_bias must have last dim .* got shape \(\)"),
    (torch.zeros(3, 8), r"rel_bias leading dims must broadcast to the batch dims of q \(2,\), "
                        r"got shape \(3, 8\)"),
    (torch.zeros(2, 2, 8), r"rel_bias leading dims must broadcast"),
], ids=["list", "int", "device", "last-size", "transposed", "scalar", "lead", "extra-dim"])
def test_bad_rel_bias(rel, match):
    with pytest.raises(GradsmithError, match=match):
        attention(*_qkv(), rel_bias=rel)


def test_registered_rel_bias_example_passes_gradsmith_check():
    from gradsmith._example import examples_of
    from gradsmith.checker import check

    (ex,) = [e for e in examples_of(attention) if e.name == "rel_bias+mask+causal, L != S"]
    report = check(attention, *ex.make_args(), **ex.options)
    assert report.passed, str(report)
    assert "constant-input" not in report.codes()  # rel_bias's gradient was checked too


def test_module_forward_takes_rel_bias():
    from gradsmith.nn import Attention

    torch.manual_seed(20)
    mha = Attention(16, 4, batch_first=True).double()
    x = torch.randn(2, 6, 16, dtype=D64)
    rel = torch.randn(4, 11, dtype=D64, requires_grad=True)
    out = mha(x, is_causal=True, rel_bias=rel)
    ref = mha(x, is_causal=True, bias=dense_of(rel, 6, 6))
    torch.testing.assert_close(out, ref)
    assert_grads_match(out, ref, (rel, mha.in_proj_weight), seed=21)
