"""An argument forward asserts to be an instance of a class of the project (issue 18, corpus 9a
held-out: adjoint ODE wrappers ``assert isinstance(func, AdjModule)``, an abstract base whose
concrete subclasses the project defines).

No stand-in of gradsmith's passes such an assert, so every layout failed on it and the row was
a skip. Now the argument is built from the project's class, or from its concrete subclasses
when it is abstract, with the values the constructor states. Reduced case written here;
gradients compared with autograd of the same expression; a backward that drops the sign still
fails.
"""

from __future__ import annotations

import pytest
import torch
from source_cases import check_rows, error_codes, load_source

from gradsmith.discovery import Synthesized, synthesize
from gradsmith.discovery.asserted_types import asserted_classes

SOURCE = '''
from abc import ABC, abstractmethod

import torch
from torch.autograd import Function


class Dynamics(torch.nn.Module, ABC):
    """Dynamics dx/dt = f(x) the integrator below is written for."""

    @abstractmethod
    def forward(self, x):
        ...


class Decay(Dynamics):
    def __init__(self, rate: float = 0.5):
        super().__init__()
        self.rate = rate

    def forward(self, x):
        return torch.exp(-self.rate * x)


class Step(Function):
    @staticmethod
    def forward(ctx, x, dynamics):
        assert isinstance(dynamics, Dynamics), "Expected `dynamics` to be an instance of Dynamics"
        ctx.dynamics = dynamics
        ctx.save_for_backward(x)
        return dynamics(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        rate = ctx.dynamics.rate
        return {grad}, None
'''
RIGHT = "g * -rate * torch.exp(-rate * x)"
WRONG = "g * rate * torch.exp(-rate * x)"  # the sign dropped


def test_the_asserted_argument_is_built_from_the_projects_concrete_subclass(tmp_path):
    path = tmp_path / "asserted_ops.py"
    path.write_text(SOURCE.format(grad=RIGHT))
    module = load_source(path, "asserted_ops")
    found = synthesize(module.Step)
    assert isinstance(found, Synthesized), found
    x, dynamics = found.args
    assert type(dynamics) is module.Decay and dynamics.rate == 0.5
    assert "Decay()" in found.description
    g = torch.randn(x.shape, dtype=torch.float64)
    (got,) = torch.autograd.grad(module.Step.apply(x, dynamics), x, g)
    y = x.detach().clone().requires_grad_()
    (reference,) = torch.autograd.grad(torch.exp(-0.5 * y), y, g)  # autograd of forward
    torch.testing.assert_close(got, reference)


def test_a_right_backward_passes_where_it_was_skipped(tmp_path):
    row = check_rows(tmp_path / "asserted_right.py", SOURCE.format(grad=RIGHT))["Step"]
    assert row["verdict"] == "pass", row.get("reason") or row.get("text")


@pytest.mark.parametrize("grad", [WRONG], ids=["sign dropped"])
def test_a_wrong_backward_still_fails(tmp_path, grad):
    row = check_rows(tmp_path / "asserted_wrong.py", SOURCE.format(grad=grad))["Step"]
    assert row["verdict"] == "fail"
    assert "gradient-mismatch" in error_codes(row)


ASSERT = '        assert isinstance(dynamics, Dynamics), "Expected `dynamics` to be an instance of Dynamics"\n'


@pytest.mark.parametrize("check, read", [
    ("        if not isinstance(dynamics, Dynamics):\n            raise TypeError('a Dynamics')\n",
     True),
    ("        if isinstance(dynamics, Dynamics):\n            x = x * 1\n", False),
], ids=["if not isinstance: raise (a requirement)", "if isinstance: (a branch, not one)"])
def test_only_a_refusal_makes_an_argument_a_project_class(tmp_path, check, read):
    path = tmp_path / "refused_ops.py"
    path.write_text(SOURCE.format(grad=RIGHT).replace(ASSERT, check))
    module = load_source(path, "refused_ops")
    found = asserted_classes(module.Step.forward, ["x", "dynamics"])
    assert found == ({"dynamics": module.Dynamics} if read else {})
