"""Zero-config inputs for kernels whose host code says the shapes it wants (our own kernels in
tests/triton/stated_kernels.py and named_kernels.py): synthesis reads the statements, and the verdicts on those
inputs are right, judged against plain PyTorch."""

import copy

import named_kernels as N
import pytest
import stated_kernels as K
import torch

import gradsmith
from gradsmith.discovery import Synthesized, synthesize

CASES = {  # Function, its reference, the input a broken backward gets wrong
    "head-mix": (K.HeadMix, K.head_mix_reference, None),
    "head-mix-bad-backward": (K.HeadMixBadBackward, K.head_mix_reference, {"h"}),
    "modulated": (N.Modulated, N.modulated_reference, None),
    "modulated-bad-backward": (N.ModulatedBadBackward, N.modulated_reference, {"X"}),
    "sections": (K.SectionGain, K.section_gain_reference, None),
    "sections-bad-backward": (K.SectionGainBadBackward, K.section_gain_reference, {"x", "w"}),
    "coefficients": (K.Coefficients, K.coefficients_reference, None),
    "coefficients-bad-backward": (K.CoefficientsBadBackward, K.coefficients_reference, {"phi"}),
    "activation": (N.Activation, N.activation_reference, None),
    "activation-bad-backward": (N.ActivationBadBackward, N.activation_reference, {"x"}),
}


_SYNTHESIZED: dict = {}


def _found(fn):
    # Synthesis runs forward (interpreted: seconds) on each layout it tries, and gives the same
    # inputs for the same Function every time (seed 0): once per Function here, then a deep copy
    # for each test, so no test sees tensors another test used.
    if fn not in _SYNTHESIZED:
        _SYNTHESIZED[fn] = synthesize(fn)
    found = _SYNTHESIZED[fn]
    assert isinstance(found, Synthesized), found.reason
    return copy.deepcopy(found)


def test_a_layout_stated_by_a_message_and_a_view():
    # "x must be [..., HC, C]" in the helper forward calls; h.contiguous().view(-1, HC)
    found = _found(K.HeadMix)
    x, h = found.args
    assert x.dim() == 3 and h.shape == x.shape[:-1]
    assert x.shape[-2] != x.shape[-1]  # distinct names, distinct sizes
    assert "as [..., HC, C] (from the message" in found.description
    other = found.variants[0].args
    assert other[1].shape == other[0].shape[:-1] and other[0].shape != x.shape


def test_a_tensor_the_name_tables_take_for_a_number():
    # scale: 2.0 by name; the code needs a tensor whose size is a multiple of the hidden size
    # (and eps stays the float the kernel reads); float64 is refused by backward: float32
    X, scale, eps = _found(N.Modulated).args
    assert isinstance(scale, torch.Tensor) and scale.numel() % X.shape[-1] == 0
    assert isinstance(eps, float)
    assert X.dtype == torch.float32


def test_a_section_list_sums_to_the_dimension_it_splits():
    x, w, sections = _found(K.SectionGain).args
    assert w.shape == (3,)  # from the docstring
    assert len(sections) == 3 and all(isinstance(n, int) and n > 0 for n in sections)
    assert sum(sections) == x.shape[-1]


def test_comments_an_equality_and_a_flag_the_message_names():
    x, phi, alpha, allow_fp32 = _found(K.Coefficients).args
    assert allow_fp32 is True  # "set allow_fp32=True for FP32" in the failing assert
    assert x.dtype == torch.float32  # float64 refused, float16 is not what the interpreter runs
    assert phi.shape == (x.shape[-2] * x.shape[-1], x.shape[-2] ** 2)  # HC * HC == M


def test_a_mode_string_its_docstring_lists():
    found = _found(N.Activation)
    assert found.args[1] == "softsign"  # the first listed value; the other is a variant
    assert "act='sigmoid'" in [v.change for v in found.variants]


@pytest.mark.parametrize("name", ["head-mix", "modulated", "sections", "coefficients",
                                  "activation"])
def test_correct_kernels_agree_with_plain_pytorch(name):
    # Independent of gradsmith's method: outputs and autograd gradients against the reference.
    fn, reference, _ = CASES[name]
    args = _found(fn).args
    mine = [a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor)
            else a for a in args]
    ref = [a.detach().double().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor)
           else a for a in args]
    out, want = fn.apply(*mine), reference(*ref)
    torch.testing.assert_close(out.double(), want, atol=1e-5, rtol=1e-5)
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    out.backward(g.to(out.dtype))
    want.backward(g)
    for a, b in zip(mine, ref):
        if isinstance(a, torch.Tensor) and a.requires_grad:
            torch.testing.assert_close(a.grad.double(), b.grad, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", list(CASES))
def test_zero_config_verdicts(name):
    fn, reference, wrong = CASES[name]
    names = gradsmith.discovery.parameter_names(fn)
    report = gradsmith.check(fn, *_found(fn).args, checks=["gradients"])
    bad = {(f.code, f.input) for f in report.findings if f.is_error}
    if wrong is None:
        assert report.passed, report
    else:
        assert bad == {("gradient-mismatch", n) for n in wrong}, (bad, names)
    if not torch.cuda.is_available():  # with a GPU the kernels run compiled
        assert "triton-interpreted" in report.codes()
