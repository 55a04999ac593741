"""``gradsmith check`` and a backward autograd cannot differentiate, wholly or in part (issue
18): the row PASSes with one ``double-backward-unsupported`` warning; ``--require
second-order`` (or ``require = ["second-order"]`` in ``[tool.gradsmith.check]``) makes it fail.
The reference is torch's gradgradcheck."""

from __future__ import annotations

import json

import torch

# First order right; 3 x^2 computed in forward under no_grad: double backward silently 0.
NO_GRAD = """
@gradsmith.example(lambda: (torch.randn(5, dtype=torch.float64, requires_grad=True),))
class NoGradCube(Function):
    @staticmethod
    def forward(ctx, x):
        with torch.no_grad():
            d = 3 * x * x
        ctx.save_for_backward(d)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (d,) = ctx.saved_tensors
        return g * d
"""

# First order right; its derivative 3 g x is non-zero and half the true 6 g x (partial).
HALF = """
@gradsmith.example(lambda: (torch.randn(5, dtype=torch.float64, requires_grad=True),))
class HalfDetachedCube(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * g * x * x.detach()
"""

ONCE = """
from torch.autograd.function import once_differentiable


@gradsmith.example(lambda: (torch.randn(5, dtype=torch.float64, requires_grad=True),))
class OnceCube(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * g * x * x
"""


def _row(out: str, name: str) -> dict:
    return {r["name"]: r for r in json.loads(out)["results"]}[name]


def _gradgradcheck(path, name) -> bool:
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"_ref_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = torch.randn(5, dtype=torch.float64, requires_grad=True)
    fn = getattr(module, name).apply
    return torch.autograd.gradcheck(fn, (x,)) and torch.autograd.gradgradcheck(
        fn, (x,), raise_exception=False)


def test_missing_second_derivative_passes_with_a_warning_unless_required(write, gradsmith_cli,
                                                                       tmp_path):
    path = write("ops.py", NO_GRAD)
    assert not _gradgradcheck(path, "NoGradCube")  # torch agrees double backward is broken
    code, out, _ = gradsmith_cli("ops.py", "--no-isolate", "--no-compat", "--format", "json")
    row = _row(out, "ops.py::NoGradCube")
    assert code == 0 and row["verdict"] == "pass", row["text"]
    (f,) = [f for f in row["report"]["findings"] if f["check"] == "second_order"]
    assert (f["code"], f["severity"]) == ("double-backward-unsupported", "warning")
    # the one-line verdict counts it, as any warning of a passing Function
    code, out, _ = gradsmith_cli("ops.py", "--no-isolate", "--no-compat")
    assert code == 0 and "PASS (1 warning)" in out and "double-backward-unsupported" in out
    # required on the command line (no deployment checks needed for it) ...
    code, out, _ = gradsmith_cli("ops.py", "--no-isolate", "--no-compat", "--format", "json",
                                 "--require", "second-order")
    row = _row(out, "ops.py::NoGradCube")
    assert code == 1 and row["verdict"] == "fail"
    (f,) = [f for f in row["report"]["findings"] if f["code"] == "double-backward-unsupported"]
    assert f["severity"] == "error" and f["details"]["required"] == "second-order"
    assert f["message"].startswith("second-order is required")
    # ... or in pyproject
    (tmp_path / "pyproject.toml").write_text(
        '[tool.gradsmith.check]\nrequire = ["second-order"]\n')
    code, out, _ = gradsmith_cli("ops.py", "--no-isolate", "--no-compat", "--format", "json")
    assert code == 1 and _row(out, "ops.py::NoGradCube")["verdict"] == "fail"


def test_once_differentiable_holds_whether_second_order_is_required_or_not(write,
                                                                           gradsmith_cli):
    write("ops.py", ONCE)  # double backward raises, as its author intends
    for extra in ([], ["--require", "second-order"]):
        got, out, _ = gradsmith_cli("ops.py", "--no-isolate", "--no-compat", "--format", "json",
                                    *extra)
        row = _row(out, "ops.py::OnceCube")
        assert got == 0, row["text"]
        codes = {f["code"] for f in row["report"]["findings"]}
        assert not codes & {"double-backward-unsupported", "required-not-checked"}


def test_a_partial_second_derivative_passes_with_the_warning_unless_required(write,
                                                                           gradsmith_cli):
    path = write("ops.py", HALF)
    assert not _gradgradcheck(path, "HalfDetachedCube")  # torch agrees it is not right
    got, out, _ = gradsmith_cli("ops.py", "--no-isolate", "--no-compat", "--format", "json")
    row = _row(out, "ops.py::HalfDetachedCube")
    assert got == 0 and row["verdict"] == "pass", row["text"]
    (f,) = [f for f in row["report"]["findings"] if f["check"] == "second_order"]
    assert (f["code"], f["severity"]) == ("double-backward-unsupported", "warning")
    assert f["details"]["partial"] == ["x"] and f["details"]["zero"] == []
    got, out, _ = gradsmith_cli("ops.py", "--no-isolate", "--no-compat", "--format", "json",
                                "--require", "second-order")
    row = _row(out, "ops.py::HalfDetachedCube")
    assert got == 1 and row["verdict"] == "fail", row["text"]
    (f,) = [f for f in row["report"]["findings"] if f["code"] == "double-backward-unsupported"]
    assert f["severity"] == "error" and f["message"].startswith("second-order is required")


def test_required_second_order_that_did_not_run_is_not_checked():
    from gradsmith._check_policy import apply

    # second_order skipped because first order is wrong: required, it was not established
    report = {"name": "f", "checks": ["gradients"], "elapsed": 0.0, "compat": {},
              "skipped": {"second_order": "first-order gradients are wrong (gradient-mismatch "
                                          "on x)"},
              "findings": [{"code": "gradient-mismatch", "severity": "error", "message": "m",
                            "hint": "h", "check": "gradients", "input": "x", "details": {}}]}
    row = {"name": "f", "verdict": "fail", "error": None, "report": report}
    apply([row], select=[], ignore=[], require=["second-order"])
    (f,) = [f for f in report["findings"] if f["code"] == "required-not-checked"]
    assert f["severity"] == "error" and "first-order gradients are wrong" in f["message"]
    assert row["verdict"] == "fail"


def test_a_row_failed_by_require_gets_a_repro_script_that_reproduces(write, gradsmith_cli,
                                                                     tmp_path):
    import subprocess
    import sys

    path = write("ops.py", NO_GRAD)
    assert not _gradgradcheck(path, "NoGradCube")  # torch's reference: double backward is 0
    got, _, _ = gradsmith_cli("ops.py", "--no-isolate", "--no-compat", "--repro", "plain")
    assert got == 0 and not list((tmp_path / "plain").glob("*.py"))  # a pass: no script
    got, out, _ = gradsmith_cli("ops.py", "--no-isolate", "--no-compat", "--repro", "req",
                                "--require", "second-order")
    (script,) = (tmp_path / "req").glob("*double-backward-unsupported*.py")
    assert got == 1, out
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 0 and "REPRODUCED" in done.stdout, done.stdout + done.stderr


# First order right; double backward raises: exp saves its result, which backward scales in
# place (only a graph built with create_graph=True notices).
RAISES = """
@gradsmith.example(lambda: (torch.randn(5, dtype=torch.float64, requires_grad=True),))
class ExpScaledInPlace(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.exp()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        y = x.exp()
        y.mul_(g)
        return y
"""


def test_a_double_backward_that_raises_passes_with_a_warning_unless_required(write,
                                                                           gradsmith_cli):
    import importlib.util

    import pytest

    path = write("ops.py", RAISES)
    spec = importlib.util.spec_from_file_location("_ref_raises", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = torch.randn(5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(module.ExpScaledInPlace.apply, (x,))  # first order right
    with pytest.raises(RuntimeError, match="inplace"):  # torch's own double backward raises
        torch.autograd.gradgradcheck(module.ExpScaledInPlace.apply, (x,))
    got, out, _ = gradsmith_cli("ops.py", "--no-isolate", "--no-compat", "--format", "json")
    row = _row(out, "ops.py::ExpScaledInPlace")
    assert got == 0 and row["verdict"] == "pass", row["text"]
    (f,) = [f for f in row["report"]["findings"] if f["code"] == "double-backward-error"]
    assert f["severity"] == "warning" and "differentiates twice" in f["message"]
    got, out, _ = gradsmith_cli("ops.py", "--no-isolate", "--no-compat", "--format", "json",
                                "--require", "second-order")
    row = _row(out, "ops.py::ExpScaledInPlace")
    assert got == 1 and row["verdict"] == "fail", row["text"]
    (f,) = [f for f in row["report"]["findings"] if f["code"] == "double-backward-error"]
    assert f["severity"] == "error" and f["message"].startswith("second-order is required")
