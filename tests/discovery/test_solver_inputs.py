"""A Function whose forward runs a solver object it is given (issue 18, corpus 4 part a:
decision-focused learning layers call ``module.optmodel.solve()`` through helpers; a stand-in
cannot promise a true optimum, which their backward relies on). Zero-config keeps the skip,
and says why and what to register: the printed decorator, with the ``...`` replaced by the
user's solver, checks the Function. Reduced cases, written here."""

import re

import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery.synthesize import NoInputs, synthesize


class VertexSolver:
    """The cheapest of the unit vectors: argmin over the simplex's vertices of c . v."""

    def __init__(self) -> None:
        self.cost = None

    def setObj(self, c):
        self.cost = c

    def solve(self):
        best = torch.nn.functional.one_hot(self.cost.argmin(-1), self.cost.shape[-1])
        return best.to(self.cost.dtype)


class Layer:
    def __init__(self) -> None:
        self.optmodel = VertexSolver()

    @torch.no_grad()
    def _optimum(self, c):
        return _solve(c, self)


def _solve(c, module):
    model = module.optmodel
    model.setObj(c)
    return model.solve()


def _optimal_value(through_method: bool, wrong: bool = False):
    class OptimalValue(Function):
        """min over vertices of c . v; its gradient is the optimal vertex (Danskin)."""

        @staticmethod
        def forward(ctx, cost, module: Layer):
            sol = module._optimum(cost.detach()) if through_method else _solve(cost.detach(),
                                                                              module)
            ctx.save_for_backward(sol)
            return (cost * sol).sum(-1)

        @staticmethod
        def backward(ctx, g):
            (sol,) = ctx.saved_tensors
            return g.unsqueeze(-1) * (1 - sol if wrong else sol), None

    return OptimalValue


def _printed_example(reason: str) -> str:
    return re.search(r"`(@gradsmith\.example\(.*?\))  #", reason).group(1)


def test_a_solver_object_is_not_invented_and_the_reason_names_the_call():
    for through_method in (False, True):
        found = synthesize(_optimal_value(through_method))
        assert isinstance(found, NoInputs), found
        assert "'module' is an object of type Layer" in found.reason
        assert "model.solve()" in found.reason and "true optimum" in found.reason


def test_the_printed_example_with_the_users_solver_checks_the_function():
    right, wrong = _optimal_value(True), _optimal_value(True, wrong=True)
    line = _printed_example(synthesize(right).reason)
    assert line.endswith(", ...))")
    make = eval(line.replace("@gradsmith.example(", "(").replace("...", "Layer()"),
                {"torch": torch, "Layer": Layer})
    args = make()
    cost = args[0]
    g = torch.randn(cost.shape[:-1], dtype=torch.float64)
    (got,) = torch.autograd.grad(right.apply(*args), cost, g)
    (reference,) = torch.autograd.grad(torch.amin(cost, -1), cost, g)  # torch's own min
    torch.testing.assert_close(got, reference)
    assert gradsmith.check(right, *args).passed
    assert "gradient-mismatch" in gradsmith.check(wrong, *make()).codes("error")
