"""GS244/GS249 and Python's scopes (fixtures/call_keywords_scope.py, CPU): the calls of a name
an enclosing function or the method itself binds run and give the right result (``torch.roll``
is the reference), so they are not reported; the module-level helper called with a keyword it
lacks raises TypeError and is."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "call_keywords_scope.py"


@pytest.fixture(scope="module")
def mod(load_fixture):
    return load_fixture(FIXTURE, "call_keywords_scope_fixture")


def test_shadowed_helpers_bind_and_only_the_module_call_is_reported(mod):
    torch.manual_seed(0)
    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    w = torch.randn(4, 3, dtype=torch.float64)
    out = mod.make_shift().apply(x)
    torch.testing.assert_close(out, torch.roll(x, 1, 0))
    torch.testing.assert_close(torch.autograd.grad((out * w).sum(), x)[0],
                               torch.autograd.grad((torch.roll(x, 1, 0) * w).sum(), x)[0])
    with pytest.raises(TypeError, match="unexpected keyword argument 'wrap'"):
        mod.ShiftRenamed.apply(x)
    found = [(f.code, f.severity, f.line) for f in lint(FIXTURE, config=False)]
    line = next(n for n, t in enumerate(FIXTURE.read_text().splitlines(), 1)
                if t.endswith("# GS244"))
    assert found == [("GS244", "error", line)]
