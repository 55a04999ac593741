"""``--repro`` on the kinds of rows the real-code corpus found hard to replay: a module argument
whose parameters are also passed to apply (reversible-network libraries), a backward that
crashes with one input frozen, a backward that draws random samples, a forward that computes
in float32 whatever it is given, a function argument only backward calls (synthesised) and
a top-level function passed as an argument.
Each script must end with REPRODUCED and print the finding's own numbers, with plain PyTorch
only."""

from __future__ import annotations

import json
import sys

import pytest

from gradsmith.cli import main as cli_main

CASES = '''
import torch
import torch.nn.functional as F
from torch.autograd import Function
from torch.autograd.function import once_differentiable

import gradsmith


def _layer():
    torch.manual_seed(0)
    return torch.nn.Linear(3, 2).double()


def _x():
    return torch.randn(4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))


def _args():
    layer = _layer()
    return (_x().requires_grad_(), layer, *layer.parameters())


@gradsmith.example(_args)
class AliasedDoubledWeightGrad(Function):
    \"\"\"Reversible-network style: the module's own parameters are passed to apply as well;
    backward doubles the weight's gradient.\"\"\"

    @staticmethod
    def forward(ctx, x, layer, *weights):
        ctx.layer = layer
        ctx.save_for_backward(x)
        with torch.no_grad():
            return layer(x)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        x = x.detach().requires_grad_(True)
        weight, bias = ctx.layer.weight, ctx.layer.bias
        with torch.enable_grad():
            out = ctx.layer(x)
        gx, gw, gb = torch.autograd.grad(out, (x, weight, bias), g)
        return gx, None, 2 * gw, gb


@gradsmith.example(_args)
class AliasedFrozenCrash(Function):
    \"\"\"Differentiates with respect to every parameter: crashes when one is frozen.\"\"\"

    @staticmethod
    def forward(ctx, x, layer, *weights):
        ctx.layer = layer
        ctx.save_for_backward(x)
        with torch.no_grad():
            return layer(x)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        x = x.detach().requires_grad_(True)
        params = tuple(ctx.layer.parameters())
        with torch.enable_grad():
            out = ctx.layer(x)
        grads = torch.autograd.grad(out, (x, *params), g)
        return (grads[0], None, *grads[1:])


class SampledSoftmaxCounts(Function):
    \"\"\"logsumexp whose backward returns the counts of 4 one-hot samples of the softmax.\"\"\"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.logsumexp(x, -1)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        n = x.shape[-1]
        draws = torch.multinomial(x.softmax(-1).reshape(-1, n), 4, True)
        return g.unsqueeze(-1) * F.one_hot(draws, n).sum(1).reshape(x.shape).to(x.dtype)


class Float32Forward(Function):
    \"\"\"Computes in float32 whatever it is given; backward forgets a factor.\"\"\"

    @staticmethod
    def forward(ctx, x):
        return x.float() * 3

    @staticmethod
    def backward(ctx, g):
        return g.double() * 2


def _halve(y):
    return 0.5 * y


@gradsmith.example(lambda: (_halve, _x().requires_grad_()))
class AppliesGivenFunction(Function):
    \"\"\"Applies a top-level function it is given (the script must load that very function);
    backward forgets its factor.\"\"\"

    @staticmethod
    def forward(ctx, fn, x):
        return fn(x)

    @staticmethod
    def backward(ctx, g):
        return None, g


class HandsTimeToState(Function):
    \"\"\"Only backward calls its function argument (synthesised as a plain function, which the
    script must rebuild): t's gradient goes to y through rate(t, y).\"\"\"

    @staticmethod
    def forward(ctx, rate, t, y):
        ctx.rate = rate
        ctx.save_for_backward(t, y)
        return t.detach(), y.detach()

    @staticmethod
    def backward(ctx, gt, gy):
        t, y = ctx.saved_tensors
        return None, None, gy + gt * ctx.rate(t, y)


class ConfigScaled(Function):
    \"\"\"A config object (synthesised as a namespace, a called attribute a plain function),
    which the script must rebuild without gradsmith: backward doubles the scale.\"\"\"

    @staticmethod
    def forward(ctx, x, cfg):
        ctx.scale = cfg.scale
        return cfg.transform(x) * cfg.scale

    @staticmethod
    def backward(ctx, g):
        return g * 2 * ctx.scale, None
'''

EXPECTED = [
    ("AliasedDoubledWeightGrad", "gradient-mismatch", "args[2]"),
    ("AliasedFrozenCrash", "needs-input-grad-mismatch", "args[3]"),
    ("SampledSoftmaxCounts", "undeclared-estimator", "x"),
    ("Float32Forward", "gradient-mismatch", "x"),
    ("HandsTimeToState", "undeclared-estimator", "y"),
    ("AppliesGivenFunction", "gradient-mismatch", "x"),
    ("ConfigScaled", "gradient-mismatch", "x"),
]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("repro_cases")
    source = root / "cases.py"
    source.write_text(CASES)
    out = root / "scripts"
    report = root / "report.json"
    old = sys.stdout
    with open(report, "w") as handle:
        sys.stdout = handle
        try:
            cli_main(["check", str(source), "--no-isolate", "--no-compat", "--repro", str(out),
                      "--format", "json"])
        finally:
            sys.stdout = old
    return json.loads(report.read_text()), out


def _finding(doc, name, code, label):
    row = next(r for r in doc["results"] if r["name"].endswith("::" + name))
    return next(f for f in row["report"]["findings"]
                if f["code"] == code and f["input"] == label)


@pytest.mark.parametrize("name, code, label", EXPECTED, ids=[e[0] for e in EXPECTED])
def test_the_script_reproduces_the_finding(run, name, code, label, run_script):
    doc, out = run
    finding = _finding(doc, name, code, label)
    stem = label.replace("[", "_").replace("]", "")
    (script,) = out.glob(f"*{name}__{code}__{stem}.py")
    text = script.read_text()
    assert "import gradsmith" not in text and "from gradsmith" not in text
    # the fixture module imports gradsmith to register its examples; the script itself must not
    done = run_script(script)
    assert done.returncode == 0 and "REPRODUCED:" in done.stdout, done.stdout + done.stderr
    for _, analytic, numerical in finding["details"].get("elements", [])[:3]:
        assert f"analytic {analytic:.6g}, numerical {numerical:.6g}" in done.stdout


def test_a_parameter_passed_along_is_perturbed_where_the_module_reads_it(run):
    # Finite differences of the weight reach the module (the script gives it the perturbed
    # value too): the true gradient is half what this backward returns, never 0.
    doc, _ = run
    finding = _finding(doc, "AliasedDoubledWeightGrad", "gradient-mismatch", "args[2]")
    for _, analytic, numerical in finding["details"]["elements"]:
        assert numerical == pytest.approx(analytic / 2, rel=1e-6)
