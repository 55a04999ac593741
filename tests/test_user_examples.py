"""The files the README and examples/README.md point users at say what they claim."""

import importlib.util
from pathlib import Path

import pytest

import gradsmith

ROOT = Path(__file__).resolve().parents[1]


def _load(relpath: str):
    spec = importlib.util.spec_from_file_location(Path(relpath).stem, ROOT / relpath)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["Swish", "ClippedSignSTE"])
def test_user_examples_pass_check(name):
    report = gradsmith.check(getattr(_load("examples/my_ops.py"), name))
    assert report.passed, report
    assert not [f for f in report.findings if f.severity != "info"], report


@pytest.mark.parametrize(("name", "code"), [
    ("LinearNoTranspose", "gradient-mismatch"),
    ("ScaleGradOutputInPlace", "grad-output-mutated"),
])
def test_demo_bugs_are_caught_with_the_documented_finding(name, code):
    report = gradsmith.check(getattr(_load("docs/demo/buggy_ops.py"), name))
    assert not report.passed
    assert code in {f.code for f in report.findings if f.severity == "error"}, report


def test_demo_missing_second_derivative_is_a_warning():
    # first order right, second derivative silently 0: harms only who differentiates twice
    report = gradsmith.check(_load("docs/demo/buggy_ops.py").DetachedSquare)
    assert report.passed, report
    assert "double-backward-unsupported" in report.codes("warning"), report


def test_user_examples_lint_clean_and_demo_does_not():
    assert [f for f in gradsmith.lint([str(ROOT / "examples")]) if f.severity != "info"] == []
    codes = {f.code for f in gradsmith.lint([str(ROOT / "docs/demo/buggy_ops.py")])}
    assert {"GS102", "GS203"} <= codes
