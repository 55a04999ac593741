"""Which raised errors are a synthesised object's (a skip) and which stay the Function's (issue 18:
an ``AttributeError``/``TypeError`` raised on an object gradsmith synthesised is gradsmith's
failure, never demonstrated harm). Only the class of an argument synthesis built counts: a
tensor, a builtin value, or an error of another kind is left as it was."""

from __future__ import annotations

import pytest
import torch

from gradsmith.checker.report import Finding
from gradsmith.discovery.lacked import lacked_by_synthesised


class StandIn:
    """Plays an object synthesis built (its class is not a builtin)."""


def _raised(message: str, exception: str, code: str = "backward-error") -> Finding:
    return Finding(code, "error", f"backward raised {exception}: {message} (at f.py:9)", "",
                   "gradients", details={"exception": exception})


ARGS = (torch.zeros(2), StandIn())


@pytest.mark.parametrize("message, exception, said", [
    ("'StandIn' object has no attribute 'adjoint'", "AttributeError", "used .adjoint on args[1]"),
    ("'StandIn' object is not subscriptable", "TypeError", "needed args[1] subscriptable"),
    ("StandIn.apply() takes 2 positional arguments but 3 were given", "TypeError",
     "called args[1].apply() with arguments it does not take"),
], ids=["attribute", "kind", "call"])
def test_an_error_on_a_synthesised_object_is_its_own(message, exception, said):
    reason = lacked_by_synthesised(None, ARGS, [_raised(message, exception)])
    assert said in reason and "an object gradsmith synthesised" in reason


@pytest.mark.parametrize("findings", [
    [_raised("'tuple' object has no attribute 'adjoint'", "AttributeError")],  # a builtin
    [_raised("'Tensor' object has no attribute 'adjoint'", "AttributeError")],  # a tensor
    [_raised("'StandIn' object has no attribute 'adjoint'", "RuntimeError")],  # not a kind error
    [_raised("'StandIn' object has no attribute 'adjoint'", "AttributeError"),
     Finding("gradient-mismatch", "error", "gradient of x disagrees", "", "gradients")],
], ids=["builtin", "tensor", "runtime error", "beside a gradient mismatch"])
def test_other_errors_stay_the_functions(findings):
    assert lacked_by_synthesised(None, ARGS, findings) == ""
