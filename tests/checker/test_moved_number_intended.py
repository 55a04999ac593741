"""An ``intended=`` line that names a Python-number argument is read from it, not lucky (issue
18): the moved-number check of surrogate terms (``test_moved_number_surrogate.py``) now also
guards the per-input ``intended=`` writers, the fitted families
(:mod:`gradsmith.checker.intended_fit`) and the rerouted outputs
(:mod:`gradsmith.checker.rerouting`).

- An added loss whose backward gives ``y`` the constant ``0.5`` was printed ``p * ones_like(y)``
  at the check's ``p = 0.5``: right only there. Now ``0.5 * ...``; a backward that reads ``p``
  keeps ``p * ...``.
- Two outputs passing two inputs through, the first's gradient reversed: ``-alpha * grad_a``
  at ``alpha = 1`` for a backward that ignores ``alpha``. Now ``-grad_a``; one that reads it
  keeps ``-alpha * grad_a``.

Each line is checked against the hand-written gradient at another value of the number and
pasted there; a planted wrong backward FAILs under it. Reduced cases written here.
"""

from __future__ import annotations

import importlib.util
import re
import sys

import torch

import gradsmith

HEADER = "import torch\nfrom torch.autograd import Function\nimport gradsmith\n\n"

ADDED_LOSS = """
class AddedLoss(Function):
    @staticmethod
    def forward(ctx, x, y, p):
        ctx.save_for_backward(y)
        ctx.p = p
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return {scale} * g, torch.full_like(y, {constant}), None
"""

REROUTE = """
class Reroute(Function):
    @staticmethod
    def forward(ctx, a, b, alpha):
        ctx.alpha = alpha
        return a.clone(), b.clone()

    @staticmethod
    def backward(ctx, ga, gb):
        return {factor} * ga, {scale} * gb, None
"""

# (class source, its name, the number at the check, moved, backward reads it?, hand gradient)
CASES = (
    (ADDED_LOSS, "AddedLoss", 0.5, {"constant": "0.5"}, False,
     lambda p, g, y: (g, torch.full_like(y, 0.5))),
    (ADDED_LOSS, "AddedLoss", 0.5, {"constant": "ctx.p"}, True,
     lambda p, g, y: (g, torch.full_like(y, p))),
    (REROUTE, "Reroute", 1.0, {"factor": "-1"}, False, lambda p, ga, gb: (-ga, gb)),
    (REROUTE, "Reroute", 1.0, {"factor": "-ctx.alpha"}, True, lambda p, ga, gb: (-p * ga, gb)),
)
MOVED = 2.5


def _load(tmp_path, stem: str, text: str):
    path = tmp_path / f"{stem}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"moved_intended_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _source(template: str, fill: dict, scale: str = "1") -> str:
    return HEADER + template.format(**{"scale": scale, "constant": "", "factor": "",
                                       **fill})


def _line(tmp_path, stem, template, cls, number, fill) -> str:
    fn = getattr(_load(tmp_path, stem, _source(template, fill)), cls)
    gen = torch.Generator().manual_seed(3)
    a = torch.randn(3, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    b = torch.randn(3, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    torch.manual_seed(0)
    report = gradsmith.check(fn, a, b, number, compat=False)
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    line = finding.details["declaration"]
    assert finding.details["verified"] and "..." not in line, line
    return line


def test_a_number_named_in_an_intended_line_is_read_from_it(tmp_path):
    for i, (template, cls, number, fill, reads, hand) in enumerate(CASES):
        line = _line(tmp_path, f"case{i}", template, cls, number, fill)
        name = "p" if cls == "AddedLoss" else "alpha"
        body = line.split("intended=", 1)[1]
        assert bool(re.search(rf"(?<![\w.]){name}(?!\w)", body.split(":", 1)[1])) == reads, line

        # independent reference: at another value of the number, what the line declares is
        # the hand-written gradient
        intended = eval(body[:-1], {"torch": torch})  # noqa: S307
        gen = torch.Generator().manual_seed(9)
        a, b, g1, g2 = (torch.randn(3, 4, dtype=torch.float64, generator=gen) for _ in range(4))
        if cls == "AddedLoss":
            got = intended(a, b, MOVED, g1)
            want = hand(MOVED, g1, b)
        else:
            got = intended(a, b, MOVED, g1, g2)
            want = hand(MOVED, g1, g2)
        for x, y in zip(got, want):
            torch.testing.assert_close(x, y)
        assert got[2] is None


def test_the_line_passes_pasted_at_another_value_and_a_wrong_backward_fails(tmp_path):
    for i, (template, cls, number, fill, _, _) in enumerate(CASES):
        line = _line(tmp_path, f"fit{i}", template, cls, number, fill)
        moved = line.replace(f", {number})", f", {MOVED})", 1)
        assert moved != line, line

        def pasted(scale: str, moved=moved, template=template, fill=fill) -> str:
            return _source(template, fill, scale).replace("class", moved + "\nclass", 1)

        torch.manual_seed(0)
        report = gradsmith.check(getattr(_load(tmp_path, f"pasted{i}", pasted("1")), cls),
                                 compat=False)
        assert report.passed, (moved, report)
        torch.manual_seed(0)
        report = gradsmith.check(getattr(_load(tmp_path, f"wrong{i}", pasted("1.5")), cls),
                                 compat=False)
        assert "intended-mismatch" in report.codes("error"), (moved, report)


MIN_MAX = """
class MinMaxQuant(Function):
    @staticmethod
    def forward(ctx, x, clip_val, num_bits):
        ctx.save_for_backward(x, clip_val)
        y = torch.where(x < clip_val[1], x, clip_val[1])
        y = torch.where(y > clip_val[0], y, clip_val[0])
        alpha = (y.max() - y.min()).detach()
        beta = y.min().detach()
        s = 2 ** num_bits - 1
        return torch.round((y - beta) / (alpha + 1e-8) * s).div(s) * (alpha + 1e-8) + beta

    @staticmethod
    def backward(ctx, g):
        x, clip_val = ctx.saved_tensors
        gi = {scale} * g.clone()
        gi[x.ge(clip_val[1])] = 0
        gi[x.le(clip_val[0])] = 0
        return gi, None, None
"""


def test_a_number_given_as_a_0_dim_tensor_is_moved_too(tmp_path):
    # a min-max quantizer's window, its bit count a 0-dim tensor 2.0: the amplitude 1 was
    # printed (num_bits / 2) (1 only at 2 bits); now plain
    fn = _load(tmp_path, "minmax", HEADER + MIN_MAX.format(scale="1")).MinMaxQuant
    x = torch.randn(3, 3, 2, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0),
                    requires_grad=True)
    clip = torch.tensor([-1.5, 0.8], dtype=torch.float64)
    torch.manual_seed(0)
    report = gradsmith.check(fn, x, clip, torch.tensor(2.0, dtype=torch.float64), compat=False)
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    line = finding.details["declaration"]
    assert finding.details["verified"] and "num_bits /" not in line, line

    # independent reference: at 4 bits the surrogate's derivative is the window's
    surrogate = eval(re.search(r"surrogate=(lambda .*)\)$", line).group(1),  # noqa: S307
                     {"torch": torch})
    u = torch.linspace(-3, 3, 24, dtype=torch.float64, requires_grad=True)  # off the edges
    (got,) = torch.autograd.grad(surrogate(u, clip, torch.tensor(4.0)).sum(), u)
    torch.testing.assert_close(got, ((u > -1.5) & (u < 0.8)).to(torch.float64))

    moved = line.replace("torch.tensor(2.0, dtype=torch.float64)",
                         "torch.tensor(4.0, dtype=torch.float64)")
    assert moved != line, line
    for scale, ok in (("1", True), ("1.5", False)):
        text = HEADER + MIN_MAX.format(scale=scale).replace("class", moved + "\nclass", 1)
        torch.manual_seed(0)
        report = gradsmith.check(_load(tmp_path, f"minmax_{ok}", text).MinMaxQuant,
                                 compat=False)
        assert report.passed == ok, (moved, report)
        if not ok:
            assert "surrogate-mismatch" in report.codes("error"), report
