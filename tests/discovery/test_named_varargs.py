"""``forward(ctx, *args)`` that names its items in the body (``scale = args[0]``,
``(a, b) = args[:2]``) gets one synthesised input per position, named as the body names it:
before, one tensor went in (``tuple index out of range``; corpus 7's vmf-lib
``vMFLogPartition`` and nitorch's ``_ApproximateShoot`` were skipped with a decorator for a
single ``args``). References: autograd of the same expression in plain torch."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from gradsmith.checkrun.session import run_check
from gradsmith.discovery import Source, Synthesized, synthesize

CASES = '''
import torch
from torch.autograd import Function


class ScaledLog(Function):
    """log(x) * scale + shift, all through *args."""

    @staticmethod
    def forward(ctx, *args):
        scale = args[0]
        x, shift = args[1:3]
        ctx.save_for_backward(x, scale)
        return torch.log(x) * scale + shift

    @staticmethod
    def backward(ctx, g):
        x, scale = ctx.saved_tensors
        return g * torch.log(x), g * scale / x, g


class ScaledLogMissesScale(ScaledLog):
    """Planted: the scale's gradient forgets the log."""

    @staticmethod
    def backward(ctx, g):
        x, scale = ctx.saved_tensors
        return g, g * scale / x, g
'''


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    path = tmp_path_factory.mktemp("varargs") / "varargs.py"
    path.write_text(CASES)
    spec = importlib.util.spec_from_file_location("varargs_case", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = run_check([Source("file", str(path), "varargs.py")], isolate=False)
    return module, {row["name"].rsplit("::", 1)[-1]: row for row in result.rows}


def test_the_reference(cases):
    module, _ = cases
    s, x, b = (torch.rand(3, dtype=torch.float64, requires_grad=True) + 0.5 for _ in range(3))
    want = torch.autograd.grad((torch.log(x) * s + b).sum(), (s, x, b))
    got = torch.autograd.grad(module.ScaledLog.apply(s, x, b).sum(), (s, x, b))
    for w, g in zip(want, got):
        torch.testing.assert_close(g, w)


def test_one_input_per_position_named_as_the_body_names_it(cases):
    module, _ = cases
    found = synthesize(module.ScaledLog)
    assert isinstance(found, Synthesized), found
    assert len(found.args) == 3
    text = found.description
    assert text.startswith("scale") and 0 < text.index(", x") < text.index(", shift"), text


def test_correct_passes_and_planted_wrong_fails(cases):
    _, rows = cases
    assert rows["ScaledLog"]["verdict"] == "pass", rows["ScaledLog"]["text"]
    bad = rows["ScaledLogMissesScale"]
    codes = {f["code"] for f in bad["report"]["findings"] if f["severity"] == "error"}
    assert bad["verdict"] == "fail" and "gradient-mismatch" in codes, bad["text"]
