"""Zero-configuration inputs follow what the code means (issue 18).

Reduced cases, written here, of the classes of problem the new real-code corpus showed: a pair
of bounds synthesised as one value (an empty window: a correct clamp FAILed as never
exercised), a bernoulli probability made Gaussian (forward raised: SKIP), a Python number the
forward asserts made a tensor (SKIP), and an input whose gradient backward returns as ``None``
by design made trainable (a correct Function FAILed with gradient-mismatch).
"""

from numbers import Number

import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery.backward_reads import no_gradient_positions
from gradsmith.discovery.synthesize import Synthesized, synthesize


class WindowClamp(Function):
    @staticmethod
    def forward(ctx, x, min_value: float, max_value: float):
        ctx.save_for_backward(x)
        ctx.bounds = (min_value, max_value)
        return torch.clamp(x, min_value, max_value)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        lo, hi = ctx.bounds
        return g * ((x >= lo) & (x <= hi)).to(g.dtype), None, None


class BernoulliPass(Function):
    @staticmethod
    def forward(ctx, x):
        return torch.bernoulli(x)

    @staticmethod
    def backward(ctx, g):
        return g


class ScaledByNumber(Function):
    @staticmethod
    def forward(ctx, v, z):
        assert isinstance(v, Number), "v must be a Python number"
        ctx.v = v
        return z * v

    @staticmethod
    def backward(ctx, g):
        return None, g * ctx.v


class WeightedSum(Function):
    """Gradient for w only; m is data (sample positions), None by design."""

    @staticmethod
    def forward(ctx, w, m):
        ctx.save_for_backward(m)
        return (w * m).sum()

    @staticmethod
    def backward(ctx, g):
        (m,) = ctx.saved_tensors
        return g * m, None


def _found(fn) -> Synthesized:
    found = synthesize(fn)
    assert isinstance(found, Synthesized), found
    return found


def test_a_pair_of_bounds_gets_an_open_window_and_the_clamp_is_exercised():
    found = _found(WindowClamp)
    x, lo, hi = found.args
    assert lo < hi
    assert "min_value=-1.0, max_value=1.0" in found.description
    # Independent reference: torch.clamp's own gradient on the same inputs is not all zero.
    ref = x.detach().clone().requires_grad_()
    torch.clamp(ref, lo, hi).sum().backward()
    assert ref.grad.abs().sum() > 0
    report = gradsmith.check(WindowClamp, *found.args, compat=False)
    assert report.passed, report.codes("warning")
    assert "not-exercised" not in report.codes("warning")


def test_a_bernoulli_probability_is_made_in_the_unit_interval():
    found = _found(BernoulliPass)
    (p,) = found.args
    assert 0 <= p.min() and p.max() <= 1
    assert "probabilities" in found.description
    torch.bernoulli(p.detach())  # what the forward needs (raises outside [0, 1])


def test_a_number_the_forward_asserts_is_a_python_number():
    found = _found(ScaledByNumber)
    v, z = found.args
    assert isinstance(v, float) and not isinstance(v, torch.Tensor)
    report = gradsmith.check(ScaledByNumber, *found.args, compat=False)
    assert report.passed
    # Independent reference: autograd of z * v.
    zz = z.detach().clone().requires_grad_()
    (zz * v).sum().backward()
    torch.testing.assert_close(zz.grad, torch.full_like(zz, v))


def test_an_input_backward_returns_none_for_is_not_made_trainable():
    assert no_gradient_positions(WeightedSum) == {1}
    found = _found(WeightedSum)
    w, m = found.args
    assert w.requires_grad and not m.requires_grad
    assert "backward returns None" in found.description
    report = gradsmith.check(WeightedSum, *found.args, compat=False)
    assert report.passed, report.codes("error")


def test_a_none_that_only_one_branch_returns_keeps_the_input_trainable():
    class Conditional(Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, g):
            if g.sum() > 0:
                return g, None
            return g, g

    assert no_gradient_positions(Conditional) == set()


PAD_MODES = '''
import torch
import torch.nn.functional as F
from torch.autograd import Function


def int_to_mode(mode):
    if mode == 0:
        return "constant"
    elif mode == 1:
        return "reflect"
    raise ValueError(f"unknown mode {mode}")


class Pad(Function):
    """Pads by one on each side; backward crops, which is the adjoint only for mode 0."""

    @staticmethod
    def forward(ctx, x, mode):
        ctx.mode = int_to_mode(mode)
        return F.pad(x, (1, 1), mode=ctx.mode)

    @staticmethod
    def backward(ctx, g):
        return g[..., 1:-1], None
'''


def test_an_integer_mode_a_helper_compares_is_an_int_and_every_mode_is_tried(tmp_path):
    import importlib.util

    path = tmp_path / "pad_modes.py"
    path.write_text(PAD_MODES)
    spec = importlib.util.spec_from_file_location("pad_modes_case", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # source must be readable: the hints parse it
    found = _found(module.Pad)
    assert found.args[1] == 0 and "mode=0" in found.description
    assert [v.change for v in found.variants if v.change.startswith("mode=")] == ["mode=1"]
    # Independent reference: in reflect mode the crop is not the adjoint of the padding.
    (variant,) = [v for v in found.variants if v.change == "mode=1"]
    x = variant.args[0].detach().clone().requires_grad_()
    F_pad = torch.nn.functional.pad(x, (1, 1), mode="reflect")
    g = torch.randn_like(F_pad)
    (ref,) = torch.autograd.grad(F_pad, x, g)
    (got,) = torch.autograd.grad(module.Pad.apply(x, 1), x, g)
    assert not torch.allclose(ref, got)
    report = gradsmith.check(module.Pad, *variant.args, compat=False)
    assert "gradient-mismatch" in report.codes("error")


def test_a_backward_without_any_gradient_freezes_nothing():
    class NoGradient(Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, g):
            return None, None

    assert no_gradient_positions(NoGradient) == set()
    found = _found(NoGradient)
    assert all(a.requires_grad for a in found.args)
