"""Classes found linting fresh repositories for issue 19 (fixtures/fresh_dev8.py, CPU)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "fresh_dev8.py"


@pytest.fixture(scope="module")
def mod(load_fixture):
    return load_fixture(FIXTURE, "fresh_dev8_fixture")


@pytest.fixture(scope="module")
def found():
    return lint(FIXTURE, config=False)


def test_fixture_expectations(found, expected):
    got = {(f.line, f.code) for f in found}
    want = {(line, code) for (_, line, code) in expected(FIXTURE)}
    assert want <= got
    assert not [f for f in found if f.severity == "error" and (f.line, f.code) not in want]


def test_state_buffer_written_in_backward_is_a_warning_and_runs_right(mod, found):
    """A saved input whose gradient is always None (a statistics buffer) filled in backward:
    the gradient is right and the buffer holds what backward recorded; only a second backward
    through the graph raises, so GS227 (warning), not GS103."""
    torch.manual_seed(0)
    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    amax = torch.zeros((), dtype=torch.float64)
    weight = torch.randn(4, 3, dtype=torch.float64)
    (got,) = torch.autograd.grad((mod.AmaxScaleBw.apply(x, amax) * weight).sum(), x)
    torch.testing.assert_close(got, torch.autograd.grad((x * 2 * weight).sum(), x)[0])
    torch.testing.assert_close(amax, weight.abs().max())
    line = next(f for f in found if f.code in ("GS103", "GS227") and f.line < 24)
    assert (line.code, line.severity) == ("GS227", "warning")


def test_saved_differentiated_input_written_in_backward_stays_an_error(mod, found):
    torch.manual_seed(0)
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, dtype=torch.float64, requires_grad=True)
    out = mod.ScaleSavedInput.apply(x, w)
    out.sum().backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()
    assert [(f.code, f.severity) for f in found if f.line == 37] == [("GS103", "error")]


def test_jiterator_kernel_in_backward_is_opaque(found):
    """``torch.cuda.jiterator._create_jit_fn`` compiles C++ at run time (CUDA only): GS215
    names its call in backward; TensorIterator honours strides, so no GS221."""
    assert [(f.code, f.severity) for f in found if f.line == 59] == [("GS215", "warning")]
    assert not [f for f in found if f.code == "GS221"]


def test_package_folder_that_builds_its_extension_imports_the_extension():
    """``ops/gridsum/setup.py`` builds ``gridsum``; ``import gridsum`` inside
    ``ops/gridsum/__init__.py`` is that compiled module, so its call in backward is GS215."""
    tree = FIXTURE.parent / "fresh_dev8_ext"
    found = [(Path(f.path).name, f.line, f.code) for f in lint(tree, config=False)]
    assert found == [("__init__.py", 19, "GS215")]


def test_extension_function_wrapped_by_a_helper_in_another_module():
    """``combine_backward = _wrap(_sigcore.combine_backward)`` in ``core.py`` (a closure
    that calls its argument), then ``core.combine_backward(grad, ...)`` in backward of
    ``combine.py``: an extension call autograd cannot differentiate, GS215."""
    tree = FIXTURE.parent / "fresh_dev8_wrap"
    found = sorted((Path(f.path).name, f.line, f.code) for f in lint(tree, config=False))
    assert found == [("combine.py", 16, "GS215"), ("combine.py", 16, "GS221")]


def test_backward_arity_that_fits_only_the_default_branch(mod, found):
    """Without the option the gradient is right; with ``return_map=True`` the second output
    makes autograd pass two gradients to a backward that takes one: TypeError (GS246)."""
    torch.manual_seed(0)
    x = torch.randn(4, 2, dtype=torch.float64, requires_grad=True)
    (got,) = torch.autograd.grad(mod.ScatterMaybeMap.apply(x).sum(), x)
    torch.testing.assert_close(got, torch.autograd.grad((x * 3).sum(), x)[0])
    out, _ = mod.ScatterMaybeMap.apply(x, True)
    with pytest.raises(TypeError, match="positional argument"):
        out.sum().backward()
    (hit,) = [f for f in found if f.code == "GS246"]
    assert (hit.line, hit.severity) == (74, "warning")
    assert hit.message.endswith("takes 1 gradient(s), line 70 returns 2")


OPS = FIXTURE.parent / "fresh_dev8_ops.py"


@pytest.mark.parametrize("name", ["SquareOp", "SquareTemplate"])
def test_custom_op_in_backward_loses_the_second_derivative(load_fixture, name):
    """The first derivative through the custom op is right; the op has no autograd formula,
    so a second derivative through backward cannot be taken (autograd of ``x * x`` gives 2)."""
    mod = load_fixture(OPS, "fresh_dev8_ops_fixture")
    fn = getattr(mod, name)
    torch.manual_seed(0)
    x = torch.randn(5, dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(fn.apply(x).sum(), x, create_graph=True)
    (want,) = torch.autograd.grad((x * x).sum(), x, create_graph=True)
    torch.testing.assert_close(g, want)
    (want2,) = torch.autograd.grad(want.sum(), x)
    torch.testing.assert_close(want2, torch.full_like(x, 2.0))
    assert not g.requires_grad  # the custom op's output has no graph: d2 is lost


def test_ops_fixture_findings():
    found = [(f.line, f.code) for f in lint(OPS, config=False) if f.code == "GS215"]
    assert found == [(39, "GS215"), (52, "GS215")]


def test_inplace_option_writes_the_gradient_into_the_callers_logits(mod, found):
    """Both modes give torch's cross-entropy gradient; ``inplace=True`` also overwrites the
    caller's logits with it (GS217 names the option: a warning, the caller asked for it)."""
    torch.manual_seed(0)
    logits = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    labels = torch.tensor([0, 3, 1, 4])
    want = torch.autograd.grad(
        torch.nn.functional.cross_entropy(logits, labels, reduction="sum"), logits)[0]
    for inplace in (False, True):
        held = logits.detach().clone().requires_grad_()
        before = held.detach().clone()
        (got,) = torch.autograd.grad(mod.SoftmaxXent.apply(held, labels, inplace).sum(), held)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(held.detach(), want if inplace else before)
    assert [(f.code, f.severity) for f in found if f.line == 101] == [("GS217", "warning")]


def test_kernel_store_selected_by_an_option_value():
    """``if operation == 0: store y`` / ``elif operation == 1: store x``, nested under
    ``if onebyone == 0: ... else: ...``: a launch passing ``operation=0`` writes only y, so
    forward's input x is not written; ``operation=1`` writes x (GS101 on MergeInto only)."""
    tree = FIXTURE.parent / "fresh_dev8_select"
    found = [(f.line, f.code, f.message.rsplit("`", 2)[-2])
             for f in lint(tree, config=False) if f.severity == "error"]
    assert found == [(51, "GS101", "x")]
