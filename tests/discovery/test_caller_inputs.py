"""Inputs for a Function as its project's own callers pass them (issue 18, corpus 10a held-out,
spent: a ``**kwargs`` mapping a wrapper builds, PCA and SO(n) layers whose Module passes its
weight and state tensors).

Where synthesis for the Function itself finds nothing, a module-level wrapper or an ``nn.Module``
whose forward calls ``Fn.apply`` (or an alias of it) gets inputs instead, and the arguments it
passes to ``apply`` are recorded and become the Function's inputs. The reduced cases: a wrapper
that builds a settings mapping forward unpacks with ``**``; a Module with a weight, state
buffers and an integer counter; a wrapper that never reaches ``apply`` (the skip stays). Each
gradient is compared with autograd of the same expression written in plain PyTorch, and a
planted wrong backward reached only through the caller still FAILs.
"""

from __future__ import annotations

import sys

import pytest
import torch
from source_cases import check_rows, error_codes, load_source

from gradsmith.discovery import NoInputs, Synthesized, synthesize

WRAPPED = '''
import torch


def _shifted(x, shift, gain=1.0, order=1):
    return gain * x.roll(order, -1) + shift.mean()


class Warp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, shift, settings, x):
        ctx.settings = settings
        return _shifted(x, shift, **settings)

    @staticmethod
    def backward(ctx, g):
        gain, order = ctx.settings["gain"], ctx.settings["order"]
        return None, None, {grad}


def warp(x, shift, **settings):
    """The public entry point: the settings mapping is built here."""
    settings = {{"gain": 2.0, "order": 1, **settings}}
    return Warp.apply(torch.as_tensor(shift), settings, x)
'''
WARP_RIGHT = "gain * g.roll(-order, -1)"
WARP_WRONG = "g.roll(-order, -1)"  # the gain forgotten

STATEFUL = '''
import torch
from torch import nn


class WhitenFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, var, mean, seen):
        if int(seen) < 0:
            raise ValueError("seen counts samples")
        ctx.save_for_backward(x, weight, var, mean)
        return (x - mean).mm(weight.T) / var.sqrt()

    @staticmethod
    def backward(ctx, g):
        x, weight, var, mean = ctx.saved_tensors
        h = g / var.sqrt()
        gx = {grad_x}
        gw = h.T.mm(x - mean)
        gv = -(g * (x - mean).mm(weight.T)).sum(0) / (2 * var ** 1.5)
        return gx, gw, gv, -gx.sum(0), None


whiten = WhitenFn.apply


class Whiten(nn.Module):
    def __init__(self, n_in, n_out=2):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_out, n_in))
        self.register_buffer("var", torch.rand(n_out) + 0.5)
        self.register_buffer("mean", torch.randn(n_in))
        self.register_buffer("seen", torch.tensor([3]))

    def forward(self, X):
        return whiten(X, self.weight, self.var, self.mean, self.seen)
'''
WHITEN_RIGHT = "h.mm(weight)"
WHITEN_WRONG = "g.mm(weight)"  # the scaling by 1 / sqrt(var) forgotten

UNREACHED = WRAPPED.split("\n\ndef warp")[0].format(grad=WARP_RIGHT) + '''

def warp(x, shift, enabled=False):
    """Calls the Function only when enabled: the default never reaches it."""
    if enabled is True:
        return Warp.apply(torch.as_tensor(shift), {"gain": 2.0, "order": 1}, x)
    return x
'''


def _imported(tmp_path, name: str, source: str):
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    module = load_source(path, name)
    sys.modules[name] = module  # as an imported project module: its callers are read there
    return module


def test_a_wrapper_builds_the_mapping_forward_unpacks(tmp_path):
    module = _imported(tmp_path, "caller_warp_ops", WRAPPED.format(grad=WARP_RIGHT))
    try:
        found = synthesize(module.Warp)
        assert isinstance(found, Synthesized), found
        assert found.description.startswith("as `warp(x, shift, **settings)` passes them")
        shift, settings, x = found.args
        assert settings == {"gain": 2.0, "order": 1}  # exactly what the wrapper passes
        assert x.requires_grad and not shift.requires_grad  # backward's None: no grad
        assert "apply" not in vars(module.Warp)  # the recorder is gone
        g = torch.randn(x.shape, dtype=torch.float64)
        (got,) = torch.autograd.grad(module.Warp.apply(shift, settings, x), x, g)
        y = x.detach().clone().requires_grad_()
        (reference,) = torch.autograd.grad(2.0 * y.roll(1, -1) + shift.mean(), y, g)
        torch.testing.assert_close(got, reference)
    finally:
        del sys.modules["caller_warp_ops"]


def test_a_module_passes_its_weight_and_state(tmp_path):
    module = _imported(tmp_path, "caller_whiten_ops", STATEFUL.format(grad_x=WHITEN_RIGHT))
    try:
        found = synthesize(module.WhitenFn)
        assert isinstance(found, Synthesized), found
        assert "as `Whiten(n_in=" in found.description
        x, weight, var, mean, seen = found.args
        assert seen.dtype == torch.int64 and not seen.requires_grad
        assert weight.shape == (var.shape[0], x.shape[1]) and mean.shape == (x.shape[1],)
        assert module.whiten is module.WhitenFn.apply or module.whiten.__self__ \
            is module.WhitenFn  # the alias restored
        inputs = (x, weight, var, mean)
        got = torch.autograd.grad(module.WhitenFn.apply(*inputs, seen).sum(), inputs)
        plain = [t.detach().clone().requires_grad_() for t in inputs]
        a, w, v, m = plain
        reference = torch.autograd.grad(((a - m).mm(w.T) / v.sqrt()).sum(), plain)
        for mine, theirs in zip(got, reference):
            torch.testing.assert_close(mine, theirs)
    finally:
        del sys.modules["caller_whiten_ops"]


@pytest.mark.parametrize(("source", "name"), [
    (WRAPPED.format(grad=WARP_RIGHT), "Warp"),
    (STATEFUL.format(grad_x=WHITEN_RIGHT), "WhitenFn"),
])
def test_right_backwards_pass_through_their_callers(tmp_path, source, name):
    row = check_rows(tmp_path / f"caller_right_{name.lower()}.py", source)[name]
    assert row["verdict"] == "pass", row.get("reason") or row.get("text")
    assert "passes them" in row["inputs"]


@pytest.mark.parametrize(("source", "name"), [
    (WRAPPED.format(grad=WARP_WRONG), "Warp"),
    (STATEFUL.format(grad_x=WHITEN_WRONG), "WhitenFn"),
])
def test_a_wrong_backward_reached_only_through_a_caller_fails(tmp_path, source, name):
    row = check_rows(tmp_path / f"caller_wrong_{name.lower()}.py", source)[name]
    assert row["verdict"] == "fail", row.get("reason") or row.get("text")
    assert "gradient-mismatch" in error_codes(row)


def test_a_caller_that_never_calls_apply_leaves_the_skip(tmp_path):
    module = _imported(tmp_path, "caller_unreached_ops", UNREACHED)
    try:
        skipped = synthesize(module.Warp)
        assert isinstance(skipped, NoInputs)
        assert "callers were tried too: `warp(x, shift, enabled)`" in skipped.reason
        assert "apply" not in vars(module.Warp)
    finally:
        del sys.modules["caller_unreached_ops"]
    row = check_rows(tmp_path / "caller_unreached_check.py", UNREACHED)["Warp"]
    assert row["verdict"] == "skip"


def test_inputs_whose_backward_raised_give_way_to_a_callers_only(tmp_path):
    """Synthesised inputs with a doubt (backward raised on a guessed kind: a skip) are replaced
    by a caller's clean set, and kept as they are when no caller gives one."""
    from gradsmith.discovery.through_callers import through_callers

    guessed = Synthesized((torch.zeros(3),), "x: float64 (3,)", doubt="backward raised")
    for name, source, replaced in (("caller_doubt_ops", WRAPPED.format(grad=WARP_RIGHT), True),
                                   ("caller_doubt_unreached", UNREACHED, False)):
        module = _imported(tmp_path, name, source)
        try:
            found = through_callers(module.Warp, 0, guessed)
        finally:
            del sys.modules[name]
        assert (found is guessed) is not replaced
        if replaced:
            assert not found.doubt and found.description.startswith("as `warp(")


LAYERS = '''
import torch
from torch import nn

from .ops import Warp as _Warp


class Warper(nn.Module):
    def __init__(self, gain=3.0):
        super().__init__()
        self.settings = {"gain": gain, "order": 2}

    def forward(self, x):
        return self._run(x)

    def _run(self, x):
        return _Warp.apply(torch.zeros(2), self.settings, x)
'''


def test_a_module_of_the_package_calls_it_under_another_name(tmp_path, monkeypatch):
    """The caller lives in another module of the package, imports the Function as ``_Warp``
    and reaches ``apply`` from a helper method forward calls."""
    package = tmp_path / "caller_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from . import layers, ops\n")
    (package / "ops.py").write_text(WRAPPED.split("\n\ndef warp")[0].format(grad=WARP_RIGHT))
    (package / "layers.py").write_text(LAYERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    try:
        ops = importlib.import_module("caller_pkg.ops")
        found = synthesize(ops.Warp)
        assert isinstance(found, Synthesized), found
        assert found.description.startswith("as `Warper().forward(x)` passes them")
        shift, settings, x = found.args
        assert settings == {"gain": 3.0, "order": 2}
        g = torch.randn(x.shape, dtype=torch.float64)
        (got,) = torch.autograd.grad(ops.Warp.apply(shift, settings, x), x, g)
        y = x.detach().clone().requires_grad_()
        (reference,) = torch.autograd.grad(3.0 * y.roll(2, -1), y, g)
        torch.testing.assert_close(got, reference)
    finally:
        for name in [n for n in sys.modules if n.split(".")[0] == "caller_pkg"]:
            del sys.modules[name]


AT_INIT = STATEFUL.replace('torch.rand(n_out) + 0.5', 'torch.ones(n_out)')  # variances at 1


@pytest.mark.parametrize(("grad_x", "verdict"), [(WHITEN_RIGHT, "pass"), (WHITEN_WRONG, "fail")])
def test_state_at_its_initial_values_is_moved(tmp_path, grad_x, verdict):
    """The Module's variances start at 1, where dropping 1 / sqrt(var) is right by accident:
    the recorded set's state vectors are also scaled elementwise, and there the wrong
    backward fails; the right one passes on both."""
    assert "torch.ones(n_out)" in AT_INIT
    rows = check_rows(tmp_path / f"caller_init_{verdict}.py", AT_INIT.format(grad_x=grad_x))
    row = rows["WhitenFn"]
    assert row["verdict"] == verdict, row.get("reason") or row.get("text")
    if verdict == "fail":
        moved = [f for f in row["report"]["findings"] if f["severity"] == "error"
                 and "state vectors scaled" in f["message"]]
        assert moved and all(f["code"] == "gradient-mismatch" for f in moved)


FORMS = '''
import torch
from torch import nn


class Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return 2 * x

    @staticmethod
    def backward(ctx, g):
        return 2 * g


double = Double.apply


def direct(x):
    return Double.apply(x)


def through_alias(x):
    return double(x)


def named_only():
    return Double.__name__  # names the Function, never calls it


class Instance(nn.Module):
    def forward(self, x):
        return Double().apply(x)


class Plain:
    def __call__(self, x):
        return Double.apply(x)  # not a Module: no constructor to trust
'''


def test_the_forms_of_a_call_that_are_read(tmp_path):
    from gradsmith.discovery.callers import callers_of

    module = _imported(tmp_path, "caller_forms_ops", FORMS)
    try:
        found = [(c.name, c.is_module) for c in callers_of(module.Double)]
    finally:
        del sys.modules["caller_forms_ops"]
    assert found == [("direct", False), ("through_alias", False), ("Instance", True)]
