"""A tensor's own ``argmax`` is not a solver (issue 18, corpus 11 part b: a one-hot of
``input.argmax(dim=dim)`` with a straight-through backward was skipped as "an object whose
solver forward runs"), and a defaulted parameter that a one-value backward has no gradient
for is not passed (``return grad_output`` for ``forward(ctx, input, dim=-1)``: autograd would
raise on a call no one makes). Reduced cases, written here."""

import torch
from source_cases import check_rows, error_codes

from gradsmith.discovery.defaults import passable
from gradsmith.discovery.solvers import solver_arguments

SOURCE = '''
import torch


class OneHotMax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, dim=-1):
        output = input.new_full(input.shape, 0.0)
        output[torch.arange(output.shape[0]), input.argmax(dim=dim)] = 1
        return output

    @staticmethod
    def backward(ctx, grad_output):
        return {grad}

'''


def _forward_params(cls):
    import inspect

    return list(inspect.signature(cls.forward).parameters.values())[1:]


def test_argmax_of_a_tensor_argument_is_not_a_solver_but_of_an_object_it_is():
    class OnTensor(torch.autograd.Function):
        @staticmethod
        def forward(ctx, scores):
            return scores.new_zeros(scores.shape).scatter(1, scores.argmax(1, True), 1.0)

    class OnObject(torch.autograd.Function):
        @staticmethod
        def forward(ctx, cost, model):
            return model.argmax(cost)

    assert solver_arguments(OnTensor, ["scores"]) == {}
    assert solver_arguments(OnObject, ["cost", "model"]) == {"model": "model.argmax()"}


def test_a_one_value_backward_leaves_the_defaulted_dim_unpassed():
    class Straight(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input, dim=-1):
            return input.argmax(dim)

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output * 1.0

    class Local(torch.autograd.Function):  # a local may hold a tuple: not counted
        @staticmethod
        def forward(ctx, input, dim=-1):
            return input

        @staticmethod
        def backward(ctx, grad_output):
            grads = (grad_output, None)
            return grads

    assert passable(Straight, _forward_params(Straight)) == 1
    assert passable(Local, _forward_params(Local)) is None


def test_the_straight_through_one_hot_is_checked_and_found_undeclared(tmp_path):
    rows = check_rows(tmp_path / "one_hot.py", SOURCE.format(grad="grad_output"))
    row = rows["OneHotMax"]
    assert row["verdict"] == "fail", row
    assert "undeclared-estimator" in error_codes(row)
    assert "wrong-grad-count" not in error_codes(row)
    assert "input: float64 (3, 4)" in row["inputs"] and "dim=" not in row["inputs"]


def test_a_declared_straight_through_passes_and_a_planted_wrong_one_fails(tmp_path):
    from source_cases import load_source

    import gradsmith

    path = tmp_path / "one_hot_declared.py"
    for grad, passes in (("grad_output", True), ("grad_output * 2", False)):
        path.write_text(SOURCE.format(grad=grad))
        module = load_source(path, f"one_hot_declared_{passes}")
        x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
        report = gradsmith.check(module.OneHotMax, x, surrogate=lambda x: x)
        assert report.passed == passes, report.codes("error")
