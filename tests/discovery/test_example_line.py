"""The example line a skip prints for an object the project's own class builds (issue 18).

torch_dpmm's ``DPMMFunction`` takes a settings object the project's class builds; synthesis
keeps how to build it (``builders.Built``), and the skip's suggested ``@gradsmith.example``
line read it as a dict of attributes: ``'dict' object is not callable``, an internal error in
place of the skip. The line names the class with its constructor arguments, and evaluates to
an object with the attributes the project's own constructor gives.
"""

from __future__ import annotations

import types

import torch

from gradsmith.discovery.builders import Built
from gradsmith.discovery.slots import Slot
from gradsmith.discovery.suggestion import example_line


class Settings:
    def __init__(self, k=3, alpha=0.5):
        self.k, self.alpha = k, alpha
        self.prior = torch.ones(k) * alpha


def test_a_built_settings_object_is_named_by_its_class_and_arguments():
    built = Built(Settings, {"k": 4, "alpha": 0.25}, "params",
                  {"k": 4, "alpha": 0.25, "prior": torch.full((4,), 0.25)}, "Settings")
    line = example_line([Slot("x", "tensor"), Slot("params", "config", built)])
    assert "Settings(k=4, alpha=0.25)" in line
    decorator = line.split("  #", 1)[0].removeprefix("@")  # the line as a user pastes it
    namespace = {"torch": torch, "Settings": Settings, "types": types,
                 "gradsmith": types.SimpleNamespace(example=lambda make: make)}
    made = eval(decorator, namespace)()  # noqa: S307 - the line under test
    want = Settings(k=4, alpha=0.25)
    assert made[1].k == want.k and torch.equal(made[1].prior, want.prior)


def test_a_namespace_of_attributes_is_still_a_simple_namespace():
    line = example_line([Slot("cfg", "config", {"scale": 2.0, "act": torch.tanh})])
    assert "types.SimpleNamespace(scale=2.0, act=lambda t: t)" in line
