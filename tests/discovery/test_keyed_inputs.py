"""An argument the code indexes by string constants (``ctx.param['neuron_Vth']``) is a dict
of those keys, not a float or a tensor (issue 18, corpus 7b: MPD-AGL's learnable surrogates
read their window's width from a dict of statistics and were skipped, "'float' object is not
subscriptable"). Reduced cases written here: a surrogate whose width comes from the dict, one
key handed to ``torch.sqrt`` (a 0-d tensor there, a Python float raises), and a scale read
from the dict whose planted wrong backward must FAIL."""

from __future__ import annotations

import importlib.util
import re
import textwrap

import pytest
import torch

import gradsmith
from gradsmith.discovery import Synthesized, synthesize
from gradsmith.discovery.uses import argument_uses

CASE = '''
import torch


class KeyedWindow(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, stats):
        ctx.save_for_backward(x)
        ctx.stats = stats
        return (x >= 0).to(x.dtype)

    @staticmethod
    def backward(ctx, grad_output):
        if ctx.stats is not None:
            width = 2.0 * torch.sqrt(1.0 + ctx.stats["tau"] ** 2) * ctx.stats["gain"]
        else:
            width = 1.0
        (x,) = ctx.saved_tensors
        return grad_output * (x.abs() < width / 2) / width, None


class KeyedScale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, cfg):
        ctx.cfg = cfg
        return x * cfg["scale"] ** cfg["power"]

    @staticmethod
    def backward(ctx, g):
        return g * ctx.cfg["scale"] ** ctx.cfg["power"], None


class KeyedScaleWrong(KeyedScale):
    @staticmethod
    def backward(ctx, g):
        return g * ctx.cfg["scale"], None  # the power forgotten


class KeyedRepeat(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, cfg):
        ctx.n = cfg["times"]
        return torch.cat([x for _ in range(cfg["times"])], -1)

    @staticmethod
    def backward(ctx, g):
        return sum(g.chunk(ctx.n, -1)), None
'''


@pytest.fixture(scope="module")
def module(tmp_path_factory):
    path = tmp_path_factory.mktemp("keyed") / "keyed_case.py"
    path.write_text(textwrap.dedent(CASE))
    spec = importlib.util.spec_from_file_location("keyed_case", path)
    found = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(found)  # source must be readable: the hints parse it
    return found


def test_keys_and_their_kinds_are_read_from_forward_and_backward(module):
    uses = argument_uses(module.KeyedWindow, ["x", "stats"])
    # only backward reads stats' keys: each is 1 (a 0-d tensor where torch takes it)
    assert uses["stats"].keyed and uses["stats"].keys == {"tau": "neutral-tensor",
                                                          "gain": "neutral"}
    assert not uses["x"].keyed
    assert argument_uses(module.KeyedRepeat, ["x", "cfg"])["cfg"].keys == {"times": "int"}


def test_a_keyed_argument_is_a_dict_forward_and_backward_run_on(module):
    found = synthesize(module.KeyedWindow)
    assert isinstance(found, Synthesized), found
    x, stats = found.args
    assert set(stats) == {"tau", "gain"} and torch.is_tensor(stats["tau"])
    assert "a mapping" in found.description
    found = synthesize(module.KeyedRepeat)
    assert isinstance(found, Synthesized), found
    assert type(found.args[1]["times"]) is int


def test_correct_passes_and_planted_wrong_backward_fails(module):
    found = synthesize(module.KeyedScale)
    x, cfg = found.args
    # Independent reference: autograd of the same expression on these inputs
    leaf = x.detach().clone().requires_grad_(True)
    (want,) = torch.autograd.grad((leaf * cfg["scale"] ** cfg["power"]).sum(), leaf)
    leaf = x.detach().clone().requires_grad_(True)
    (got,) = torch.autograd.grad(module.KeyedScale.apply(leaf, cfg).sum(), leaf)
    torch.testing.assert_close(got, want)
    assert cfg["scale"] ** cfg["power"] != cfg["scale"]  # the two backwards differ here
    assert gradsmith.check(module.KeyedScale, x.detach(), cfg).passed
    wrong = gradsmith.check(module.KeyedScaleWrong, x.detach(), cfg)
    assert "gradient-mismatch" in wrong.codes("error"), str(wrong)
    x, cfg = synthesize(module.KeyedRepeat).args
    assert gradsmith.check(module.KeyedRepeat, x.detach(), cfg).passed


def test_the_printed_declaration_passes_as_printed(module):
    x, stats = synthesize(module.KeyedWindow).args
    report = gradsmith.check(module.KeyedWindow, x.detach(), stats)
    assert report.codes("error") == {"undeclared-estimator"}, str(report)
    (f,) = report.errors
    factory, source = re.search(r"example\((lambda: .*), surrogate=(lambda .*)\)$",
                                f.details["declaration"]).groups()
    args = eval(factory, {"torch": torch})()  # noqa: S307 - gradsmith's own line, as printed
    declared = eval(source, {"torch": torch})  # noqa: S307
    assert gradsmith.check(module.KeyedWindow, *args, surrogate=declared).passed
    # Independent of the line: the rectangular window 1/w on |x| < w/2 integrated by hand,
    # with w = 2 sqrt(1 + tau^2) gain
    def by_hand(x, stats):
        w = 2.0 * float(torch.sqrt(1.0 + torch.as_tensor(stats["tau"]) ** 2)) * stats["gain"]
        return x.clamp(-w / 2, w / 2) / w
    assert gradsmith.check(module.KeyedWindow, *args, surrogate=by_hand).passed


GET_CASE = '''
import torch


class GetScale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, cfg):
        ctx.scale = cfg.get("scale") * cfg.get("gain", 3.0)
        if cfg.get("mode", "linear") == "linear":
            return x * ctx.scale
        raise ValueError("unknown mode")

    @staticmethod
    def backward(ctx, g):
        return g * ctx.scale, None


class GetScaleWrong(GetScale):
    @staticmethod
    def backward(ctx, g):
        return g / ctx.scale, None
'''


def test_a_mapping_read_with_get_keeps_the_defaults(tmp_path):
    """``cfg.get("gain", 3.0)``: forward's own default is used (the entry is left out);
    ``cfg.get("scale")`` has none, so the entry is given. Before, ``cfg`` was a namespace whose
    ``get`` returned its argument (a string), and forward raised."""
    path = tmp_path / "get_case.py"
    path.write_text(textwrap.dedent(GET_CASE))
    spec = importlib.util.spec_from_file_location("get_case", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found = synthesize(module.GetScale)
    assert isinstance(found, Synthesized), found
    x, cfg = found.args
    assert cfg == {"scale": 2.0}
    # Independent reference: the gradient of x * scale * 3 by hand
    leaf = x.detach().clone().requires_grad_(True)
    (got,) = torch.autograd.grad(module.GetScale.apply(leaf, cfg).sum(), leaf)
    torch.testing.assert_close(got, torch.full_like(leaf, 2.0 * 3.0))
    assert gradsmith.check(module.GetScale, x.detach(), cfg).passed
    wrong = gradsmith.check(module.GetScaleWrong, x.detach(), cfg)
    assert "gradient-mismatch" in wrong.codes("error"), str(wrong)
