"""Parameters of nn.Module arguments are inputs too (the checkpointing pattern)."""

import pytest
import torch
from corpus import module_args

import gradsmith


def _reference_param_grads(fn, module, x):
    """Plain PyTorch: the parameters' .grad after one backward through fn (None if never
    accumulated), next to the true gradient of module(x)."""
    module.zero_grad(set_to_none=True)
    # The input must require grad for apply to record the Function at all.
    fn.apply(module, x.detach().requires_grad_()).sum().backward()
    got = [None if p.grad is None else p.grad.clone() for p in module.parameters()]
    module.zero_grad(set_to_none=True)
    module(x).sum().backward()
    want = [p.grad.clone() for p in module.parameters()]
    module.zero_grad(set_to_none=True)
    return got, want


def test_checkpoint_accumulating_into_parameters_passes():
    module, x = module_args.mlp(), module_args._r(5, 3)
    got, want = _reference_param_grads(module_args.Checkpoint, module, x)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
    report = gradsmith.check(module_args.Checkpoint, module, x)
    assert report.passed, str(report)


def test_backward_leaving_parameters_without_gradient_fails_naming_them():
    module, x = module_args.mlp(), module_args._r(5, 3)
    got, _ = _reference_param_grads(module_args.CheckpointInputsOnly, module, x)
    assert got == [None] * 4
    report = gradsmith.check(module_args.CheckpointInputsOnly, module, x)
    (f,) = report.errors
    assert f.code == "missing-param-grad"
    assert f.details["parameters"] == ["run_function.0.weight", "run_function.0.bias",
                                       "run_function.2.weight", "run_function.2.bias"]
    assert "torch.autograd.backward(outputs, grad_outputs)" in f.hint


def test_the_users_module_is_never_touched():
    module, x = module_args.mlp(), module_args._r(5, 3).requires_grad_()
    before = [p.detach().clone() for p in module.parameters()]
    gradsmith.check(module_args.Checkpoint, module, x)
    gradsmith.check(module_args.CheckpointInputsOnly, module, x)
    assert all(p.grad is None for p in module.parameters()) and x.grad is None
    for p, b in zip(module.parameters(), before):
        assert torch.equal(p, b) and p.dtype == torch.float64


def test_frozen_parameters_are_held_constant():
    module = module_args.mlp().requires_grad_(False)
    report = gradsmith.check(module_args.CheckpointInputsOnly, module, module_args._r(5, 3))
    assert report.passed, str(report)


def test_float32_module_is_checked_in_float64_copies():
    module = module_args.mlp().float()
    x = torch.randn(5, 3)
    report = gradsmith.check(module_args.CheckpointInputsOnly, module, x)
    assert "missing-param-grad" in report.codes("error")
    assert next(module.parameters()).dtype == torch.float32


def test_parameters_also_passed_as_arguments_are_one_input():
    layer = torch.nn.Linear(3, 2).double()
    x = module_args._r(4, 3).requires_grad_()
    args = (x, layer, *layer.parameters())
    assert torch.autograd.gradcheck(module_args.WeightsPassedAlong.apply, args)  # reference
    report = gradsmith.check(module_args.WeightsPassedAlong, *args)
    assert report.passed, str(report)
    # Perturbing args[2] perturbs the module's weight itself: no separate `layer.weight` input.
    assert not any(f.input and f.input.startswith("layer.") for f in report.findings)


def test_a_backward_crashing_on_a_frozen_parameter_is_reported():
    layer = module_args.frozen_bias_linear()
    x = module_args._r(4, 3).requires_grad_()
    with pytest.raises(RuntimeError, match="does not require grad"):  # plain PyTorch too
        module_args.WeightsPassedAlongFrozenCrash.apply(x, layer, *layer.parameters()).sum(
            ).backward()
    report = gradsmith.check(module_args.WeightsPassedAlongFrozenCrash, x, layer,
                             *layer.parameters())
    assert not report.passed
    assert "does not require grad" in " ".join(f.message for f in report.errors)
