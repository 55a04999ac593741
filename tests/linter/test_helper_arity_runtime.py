"""GS249 (fixtures/helper_arity.py, CPU): every call the rule reports raises TypeError when it
runs, the way Python binds it; the twin whose calls bind (or cannot be known: unpacking,
a decorator that changes the signature, a local name, a conditional def) is correct against
a plain expression and silent."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "helper_arity.py"


@pytest.fixture(scope="module")
def mod(load_fixture):
    return load_fixture(FIXTURE, "helper_arity_fixture")


@pytest.fixture(scope="module")
def reported():
    return {f.line for f in lint(FIXTURE, config=False)
            if f.code == "GS249" and f.severity == "error"}


def _marked(name: str, nth: int = 0) -> int:
    """The line of the ``nth`` call marked ``# GS249`` in class ``name`` of the fixture."""
    lines = FIXTURE.read_text().splitlines()
    start = next(n for n, t in enumerate(lines, 1) if t.startswith(f"class {name}("))
    return [n for n, t in enumerate(lines, 1) if n > start and t.endswith("# GS249")][nth]


@pytest.mark.parametrize("name, message", [
    ("AffineTooFew", "missing 1 required positional argument: 'scale'"),
    ("AffineTwice", "got multiple values for argument 'scale'"),
    ("AffineKeywordOnly", "missing 1 required keyword-only argument: 'scale'"),
    ("AffineThroughHelper", "missing 1 required positional argument: 'scale'"),
    ("AffineWrapped", "missing 1 required positional argument: 'scale'"),
])
def test_each_reported_forward_raises_type_error(mod, reported, name, message):
    assert _marked(name) in reported
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    with pytest.raises(TypeError, match=message):
        getattr(mod, name).apply(x)


def test_reported_backward_raises_type_error(mod, reported):
    assert _marked("AffineTooFew", 1) in reported
    with pytest.raises(TypeError, match="takes from 2 to 3 positional arguments but 4"):
        mod.AffineTooFew.backward(None, torch.ones(3))


def test_only_the_calls_that_cannot_bind_are_reported(mod):
    """The twin's calls bind (or are not known for certain) and it is correct: silent."""
    torch.manual_seed(0)
    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    w = torch.randn(4, 3, dtype=torch.float64)
    out = mod.AffineRight.apply(x)
    torch.testing.assert_close(out, 2.0 * x)
    got = torch.autograd.grad((out * w).sum(), x)[0]
    torch.testing.assert_close(got, torch.autograd.grad((2.0 * x * w).sum(), x)[0])
    torch.testing.assert_close(mod.make_scaled().apply(x), 2.0 * x)  # an enclosing helper
    mod.use_scaled(lambda t, s: t * s)  # rebinds the module's `_scaled` through `global`
    torch.testing.assert_close(mod.ScaledByInstalled.apply(x), 2.0 * x)
    found = [(f.code, f.severity, f.line) for f in lint(FIXTURE, config=False)]
    lines = [n for n, text in enumerate(FIXTURE.read_text().splitlines(), 1)
             if text.endswith("# GS249")]
    assert found == [("GS249", "error", n) for n in lines]
    assert len(lines) == 6
