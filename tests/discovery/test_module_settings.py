"""A module global the training script fills, None at import, read by forward (issue 18, corpus
10b held-out, spent: QuantizedCIL's quantisers read ``global_args["quantile"]``, set by
``trainer.py`` from ``main.py``'s argparse).

Every layout failed on the None ("'NoneType' object is not subscriptable") and the row was a
skip with a generic reason. Now, where the project's own argparse states a default for every
key the Function reads, the global is set to those defaults (a run without options) and the
Inputs column says so; where it does not, the skip names the global, the keys, where the
project sets it, and how to set it. Gradients compared with autograd of the same expression at
the default; a wrong backward still fails.
"""

from __future__ import annotations

import sys
import textwrap

import pytest
import torch

from gradsmith.checkrun.session import run_check
from gradsmith.discovery import NoInputs, Source, Synthesized, synthesize
from gradsmith.discovery.module_settings import argparse_defaults

OPS = '''
import torch

settings = None  # set by main.py


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * settings["scale"] + settings["shift"]

    @staticmethod
    def backward(ctx, g):
        return {grad}
'''
MAIN = '''
import argparse

from pkg import ops


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=float, default=2.5)
    parser.add_argument("--shift", type=float, default=0.0)
    parser.add_argument("--verbose", action="store_true")
    ops.settings = vars(parser.parse_args())


if __name__ == "__main__":
    main()
'''
RIGHT = 'g * settings["scale"]'
WRONG = 'g * 2.0'  # the default's scale written as a literal


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    for name in ("pkg", "pkg.ops"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    return tmp_path


def _write(project, grad: str, main: str | None = MAIN):
    (project / "pkg" / "ops.py").write_text(textwrap.dedent(OPS.format(grad=grad)))
    if main is not None:
        (project / "main.py").write_text(textwrap.dedent(main))


def _row(project) -> dict:
    path = project / "pkg" / "ops.py"
    result = run_check([Source("file", str(path), "ops.py", names=("Scale",))], isolate=False)
    (row,) = result.rows
    return row


def test_the_projects_argparse_defaults_fill_the_global(project):
    _write(project, RIGHT)
    import pkg.ops as ops

    assert argparse_defaults(project, {"scale", "shift"}) == (
        {"scale": 2.5, "shift": 0.0, "verbose": False}, "main.py")
    found = synthesize(ops.Scale)
    assert isinstance(found, Synthesized), found
    assert ops.settings == {"scale": 2.5, "shift": 0.0, "verbose": False}
    assert "main.py's argparse defaults" in found.description
    (x,) = found.args
    g = torch.randn(x.shape, dtype=x.dtype)
    (got,) = torch.autograd.grad(ops.Scale.apply(x), x, g)
    y = x.detach().clone().requires_grad_()
    (reference,) = torch.autograd.grad(y * 2.5 + 0.0, y, g)  # autograd at the default
    torch.testing.assert_close(got, reference)


@pytest.mark.parametrize("grad, verdict", [(RIGHT, "pass"), (WRONG, "fail")],
                         ids=["right", "planted wrong"])
def test_a_check_at_the_defaults_gives_a_verdict(project, grad, verdict):
    _write(project, grad)
    row = _row(project)
    assert row["verdict"] == verdict, row
    if verdict == "fail":
        codes = {f["code"] for f in row["report"]["findings"] if f["severity"] == "error"}
        assert "gradient-mismatch" in codes


@pytest.mark.parametrize("main", [None, MAIN.replace('"--shift", type=float, default=0.0',
                                                      '"--offset", type=float, default=0.0')],
                         ids=["no argparse", "a key read has no option"])
def test_without_a_default_for_every_key_the_skip_names_the_global(project, main):
    _write(project, RIGHT, main)
    import pkg.ops as ops

    found = synthesize(ops.Scale)
    assert isinstance(found, NoInputs)
    assert ops.settings is None
    assert "`pkg.ops.settings` ('scale', 'shift')" in found.reason
    assert "pkg.ops.settings = {'scale': ..., 'shift': ...}" in found.reason
    assert ("(main.py:12)" in found.reason) is (main is not None)
