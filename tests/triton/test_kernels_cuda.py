"""Our Triton kernels natively on a CUDA GPU (skipped without one): the same verdicts as under
the interpreter, judged against plain PyTorch, with no interpreter finding and the deployment
columns run for real."""

import kernels as K
import pytest
import torch
from test_kernels import CASES

import gradsmith

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _cuda(args):
    return tuple(a.cuda() for a in args)


@pytest.mark.parametrize("name", list(CASES))
def test_verdict_against_the_reference_on_cuda(name):
    fn, make, reference, wrong = CASES[name]
    report = gradsmith.check(fn, *_cuda(make()), reference=reference)
    bad = {(f.code, f.input) for f in report.findings if f.is_error}
    assert bad == (set() if wrong is None else {("reference-mismatch", wrong)}), report
    assert report.passed == (wrong is None)
    assert "triton-interpreted" not in report.codes()


def test_correct_kernels_agree_with_plain_pytorch_on_cuda():
    # Independent of gradsmith: float32 outputs and gradients against the reference.
    for name in ("gelu", "rmsnorm", "cross-entropy"):
        fn, make, reference, _ = CASES[name]
        args = [a.float().cuda() if a.is_floating_point() else a.cuda() for a in make()]
        mine = [a.clone().requires_grad_(a.is_floating_point()) for a in args]
        ref = [a.clone().requires_grad_(a.is_floating_point()) for a in args]
        out, want = fn.apply(*mine), reference(*ref)
        torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-5)
        out.sum().backward()
        want.sum().backward()
        for a, b in zip(mine, ref):
            if a.is_floating_point():
                torch.testing.assert_close(a.grad, b.grad, atol=1e-5, rtol=1e-5)


def test_zero_config_inputs_go_to_the_gpu_for_native_kernels(monkeypatch):
    from gradsmith.discovery import synthesize

    monkeypatch.delenv("GRADSMITH_DEVICE", raising=False)
    logits, target = synthesize(K.CrossEntropy).args
    assert logits.is_cuda and target.is_cuda and logits.requires_grad and logits.is_leaf


def test_deployment_columns_run_natively():
    x = _cuda(CASES["gelu"][1]())
    report = gradsmith.check(K.Gelu, *x, compat=True,
                             checks=["gradients", "compile", "autocast", "precision"])
    for column in ("compile", "autocast"):
        assert report.compat[column]["status"] != "n/a", report.compat[column]
        assert "interpreted" not in report.compat[column].get("note", "")
