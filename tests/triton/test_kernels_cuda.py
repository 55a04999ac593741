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


def test_cli_zero_config_checks_native_kernels_in_forked_workers(tmp_path):
    # The CLI's worker server forks every task: it must not have initialised CUDA first.
    import json
    import subprocess
    import sys
    from pathlib import Path

    here = Path(__file__).parent
    proc = subprocess.Popen(
        [sys.executable, "-m", "gradsmith", "check", str(here / "kernels.py"), "--no-compat",
         "--format", "json", "--jobs", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, cwd=tmp_path, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            import os
            import signal

            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    rows = {r["name"].split("::")[-1]: r for r in json.loads(out)["results"]}
    assert not [r for r in rows.values() if "re-initialize CUDA" in (r.get("reason") or "")]
    verdicts = {name: r["verdict"] for name, r in rows.items()}
    assert verdicts == {"Gelu": "pass", "GeluBadBackward": "fail", "GeluTwice": "fail",
                        "RmsNorm": "pass", "RmsNormBadBackward": "fail", "CrossEntropy": "pass",
                        "CrossEntropyNoScale": "fail"}, (verdicts, err[-2000:])
    assert all("on cuda" in (r.get("inputs") or "") for r in rows.values()), rows
