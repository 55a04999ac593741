"""Non-tensor arguments get the kind their use asks for (issue 18, "Inputs from what the code
means"). Reduced cases, written here: each was a float tensor before, so forward crashed (a
config object, a ``torch.Size``), backward crashed on a correct Function (sections iterated in
backward), or a called activation became a module with a parameter backward was rightly never
written to train (a false ``missing-param-grad``)."""

import types

import torch
from torch.autograd import Function
from torch.autograd.function import once_differentiable

import gradsmith
from gradsmith.discovery.callables import SyntheticFn
from gradsmith.discovery.synthesize import Synthesized, synthesize


class Activated(Function):
    """act(x) * 2, with act any parameter-free function: backward recomputes it."""

    @staticmethod
    def forward(ctx, x, act):
        ctx.save_for_backward(x)
        ctx.act = act
        return act(x) * 2

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        x, = ctx.saved_tensors
        with torch.enable_grad():
            xx = x.detach().requires_grad_()
            gx, = torch.autograd.grad(ctx.act(xx), xx, g * 2)
        return gx, None


class Scaled(Function):
    """x * cfg.scale * 2 ** cfg.num_bits, the config object's attributes read in forward."""

    @staticmethod
    def forward(ctx, x, cfg):
        ctx.factor = cfg.scale * 2 ** cfg.num_bits
        return x * ctx.factor

    @staticmethod
    def backward(ctx, g):
        return g * ctx.factor, None


class QuantDequant(Function):
    """A qparams object whose methods forward calls: dequantize(quantize(x)), windowed STE."""

    @staticmethod
    def forward(ctx, x, qparams):
        ctx.save_for_backward(x)
        ctx.bounds = (qparams.min_float, qparams.max_float)
        return qparams.dequantize(qparams.quantize(x))

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        lo, hi = ctx.bounds
        return g * ((x >= lo) & (x <= hi)).to(g.dtype), None


class SectionSums(Function):
    """The sum of each section of the last dimension; backward iterates the sections."""

    @staticmethod
    def forward(ctx, x, sections):
        ctx.sections = sections
        return torch.stack([p.sum(-1) for p in torch.split(x, sections, dim=-1)], -1)

    @staticmethod
    def backward(ctx, g):
        return torch.cat([g[..., i:i + 1].expand(*g.shape[:-1], s)
                          for i, s in enumerate(ctx.sections)], -1), None


class Reshaped(Function):
    @staticmethod
    def forward(ctx, x, shape: torch.Size):
        ctx.in_shape = x.shape
        return x.reshape(shape) * 3

    @staticmethod
    def backward(ctx, g):
        return g.reshape(ctx.in_shape) * 3, None


def _found(fn):
    found = synthesize(fn)
    assert isinstance(found, Synthesized), found
    return found


def test_a_called_activation_is_a_plain_function_and_a_correct_function_passes():
    found = _found(Activated)
    x, act = found.args
    assert isinstance(act, SyntheticFn) and not isinstance(act, torch.nn.Module)
    assert "a plain function: the code calls it" in found.description
    reference, = torch.autograd.grad((act(x) * 2).sum(), x)  # autograd of the same expression
    got, = torch.autograd.grad(Activated.apply(x, act).sum(), x)
    torch.testing.assert_close(got, reference)
    report = gradsmith.check(Activated, *found.args)
    assert report.passed, report
    assert "missing-param-grad" not in {f.code for f in report.findings}


def test_a_config_object_gets_the_attributes_forward_reads():
    found = _found(Scaled)
    x, cfg = found.args
    assert isinstance(cfg, types.SimpleNamespace)
    assert isinstance(cfg.num_bits, int) and isinstance(cfg.scale, float)  # 2 ** bits: an int
    assert "a config object" in found.description
    torch.testing.assert_close(Scaled.apply(x, cfg), x * cfg.scale * 2 ** cfg.num_bits)
    assert gradsmith.check(Scaled, *found.args).passed


def test_a_config_objects_called_attributes_are_functions():
    found = _found(QuantDequant)
    x, qparams = found.args
    assert callable(qparams.quantize) and callable(qparams.dequantize)
    assert qparams.min_float < qparams.max_float  # an open window, not an empty one
    torch.testing.assert_close(QuantDequant.apply(x, qparams), x)


def test_sections_sum_to_the_split_dimension_and_a_correct_function_passes():
    found = _found(SectionSums)
    x, sections = found.args
    assert isinstance(sections, list) and sum(sections) == x.shape[-1] and len(sections) > 1
    g = torch.randn(x.shape[0], len(sections), dtype=x.dtype)
    got, = torch.autograd.grad(SectionSums.apply(x, sections), x, g)
    reference, = torch.autograd.grad(
        torch.stack([p.sum(-1) for p in torch.split(x, sections, -1)], -1), x, g)
    torch.testing.assert_close(got, reference)
    report = gradsmith.check(SectionSums, *found.args)
    assert report.passed, report


def test_a_torch_size_argument_is_a_shape():
    found = _found(Reshaped)
    x, shape = found.args
    assert isinstance(shape, torch.Size) and shape.numel() == x.numel()
    assert gradsmith.check(Reshaped, *found.args).passed


def test_a_module_named_argument_stays_a_module():
    class Checkpointed(Function):
        @staticmethod
        def forward(ctx, x, module):
            return module(x)

        @staticmethod
        def backward(ctx, g):
            return g, None

    found = _found(Checkpointed)
    assert isinstance(found.args[1], torch.nn.Module)
