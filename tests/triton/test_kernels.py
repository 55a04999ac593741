"""Our Triton kernels (tests/triton/kernels.py), run in the interpreter: gradsmith passes the
correct ones and fails each broken one with the right finding, judged against plain PyTorch."""

import kernels as K
import pytest
import torch

import gradsmith


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _x():
    return (torch.randn(3, 8, dtype=torch.float64, generator=_gen(0)),)


def _xw():
    return (torch.randn(3, 8, dtype=torch.float64, generator=_gen(1)),
            torch.randn(8, dtype=torch.float64, generator=_gen(2)))


def _zt():
    return torch.randn(4, 10, dtype=torch.float64, generator=_gen(3)), torch.tensor([0, 9, 3, 3])


CASES = {
    "gelu": (K.Gelu, _x, K.gelu_reference, None),
    "gelu-bad-backward": (K.GeluBadBackward, _x, K.gelu_reference, "x"),
    "rmsnorm": (K.RmsNorm, _xw, K.rms_norm_reference, None),
    "rmsnorm-bad-backward": (K.RmsNormBadBackward, _xw, K.rms_norm_reference, "x"),
    "cross-entropy": (K.CrossEntropy, _zt, K.cross_entropy_reference, None),
    "cross-entropy-ignores-grad-output": (K.CrossEntropyNoScale, _zt, K.cross_entropy_reference,
                                          "logits"),
}


@pytest.mark.parametrize("name", ["gelu", "rmsnorm", "cross-entropy"])
def test_correct_kernels_agree_with_plain_pytorch(name):
    # Independent of gradsmith: outputs and autograd gradients against the reference, float32.
    fn, make, reference, _ = CASES[name]
    args = [a.float() if a.is_floating_point() else a for a in make()]
    mine = [a.clone().requires_grad_(a.is_floating_point()) for a in args]
    ref = [a.clone().requires_grad_(a.is_floating_point()) for a in args]
    out, want = fn.apply(*mine), reference(*ref)
    torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-5)
    g = torch.randn(out.shape, generator=_gen(9))
    out.backward(g)
    want.backward(g)
    for a, b in zip(mine, ref):
        if a.is_floating_point():
            torch.testing.assert_close(a.grad, b.grad, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", list(CASES))
def test_verdict_against_the_reference(name):
    fn, make, reference, wrong = CASES[name]
    report = gradsmith.check(fn, *make(), reference=reference)
    if wrong is None:
        assert report.passed, report
    else:
        assert not report.passed
        bad = [f for f in report.findings if f.is_error]
        assert {(f.code, f.input) for f in bad} == {("reference-mismatch", wrong)}
    assert "reference" in report.checks
    assert "gradients" in report.skipped  # judged by the reference instead
    assert "triton-interpreted" in report.codes()


@pytest.mark.parametrize("name", ["gelu", "gelu-bad-backward", "cross-entropy"])
def test_verdict_from_finite_differences_at_the_computed_precision(name):
    fn, make, _, wrong = CASES[name]
    report = gradsmith.check(fn, *make())
    found = [f for f in report.findings if f.code == "low-precision-numerics"]
    assert found and found[0].details["computes_in"] == "float32"
    if wrong is None:
        assert report.passed, report
    else:
        assert {(f.code, f.input) for f in report.findings if f.is_error} == {
            ("gradient-mismatch", wrong)}


def test_kernel_backward_without_once_differentiable_is_one_finding():
    report = gradsmith.check(K.GeluTwice, *_x(), checks=["gradients", "second_order"])
    # a missing second derivative: one warning, the row passes (issue 18)
    assert report.passed and not report.errors, report
    bad = [f for f in report.findings if f.check == "second_order"]
    assert len(bad) == 1, bad
    assert (bad[0].code, bad[0].severity) == ("double-backward-unsupported", "warning")
    assert bad[0].details["cause"] == "kernel-backward"
    assert "Triton kernels" in bad[0].message and "@once_differentiable" in bad[0].hint
    # The harm is real: the second derivative autograd gives is 0, the true one is not.
    x = _x()[0].float().requires_grad_(True)
    (g,) = torch.autograd.grad(K.GeluTwice.apply(x).sum(), x, create_graph=True)
    assert g.grad_fn is None
    xr = x.detach().clone().requires_grad_(True)
    (gr,) = torch.autograd.grad(K.gelu_reference(xr).sum(), xr, create_graph=True)
    (hr,) = torch.autograd.grad(gr.sum(), xr)
    assert hr.abs().max() > 0.1


def test_device_columns_say_not_applicable_under_the_interpreter():
    report = gradsmith.check(K.Gelu, *_x(), compat=True,
                             checks=["gradients", "compile", "export", "autocast", "precision"])
    for column in ("compile", "export", "autocast"):
        cell = report.compat[column]
        assert cell["status"] == "n/a", (column, cell)
        assert "interpreted" in cell["note"]
    assert report.compat["float32"]["status"] == "ok"  # the kernels' own code: still checked


def test_zero_config_inputs_fit_what_the_kernels_read():
    from gradsmith.discovery import synthesize

    ce = synthesize(K.CrossEntropy)  # target read by the kernel as a class index
    logits, target = ce.args
    assert target.dtype == torch.int64 and target.shape == logits.shape[:-1]
    assert int(target.max()) < logits.shape[-1]
    norm = synthesize(K.RmsNorm)  # the weight the kernel reads has the rows' length
    x, weight = norm.args[:2]
    assert weight.shape == x.shape[-1:]


def test_out_of_bounds_kernel_access_raises_instead_of_reading_garbage():
    x = torch.randn(3, 4, dtype=torch.float64)
    with pytest.raises(Exception, match="out of bounds"):
        K.RmsNorm.apply(x, torch.randn(2, dtype=torch.float64))  # weight too short
