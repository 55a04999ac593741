"""The catalog where it is deployed: its compatibility matrix is all green or each gap is
documented; TorchScript is refused with a clear error; dynamic quantization covers
FusedLinearReLU; and (where a GPU exists) the catalog passes gradsmith.check on CUDA."""

from __future__ import annotations

import inspect
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

import gradsmith.functional as G
import gradsmith.nn as gnn
from gradsmith import GradsmithError
from gradsmith.checker.deploy.matrix import COLUMNS


@pytest.fixture(scope="module")
def catalog_rows():
    """One in-process ``gradsmith check`` of the catalog's registered examples."""
    from gradsmith.checkrun.session import run_check
    from gradsmith.discovery import default_sources

    sources = [s for s in default_sources() if s.location != "gradsmith.examples"]
    return run_check(sources, options={"compat": True}, isolate=False).rows


def test_catalog_matrix_is_green_or_each_gap_is_documented(catalog_rows):
    assert len(catalog_rows) >= 30
    for row in catalog_rows:
        report = row["report"]
        assert row["verdict"] == "pass", row["name"]
        assert set(report["compat"]) == set(COLUMNS), row["name"]  # no op skips the matrix
        loud = [f["code"] for f in report["findings"] if f["severity"] != "info"]
        assert loud == [], (row["name"], loud)
        for column, cell in report["compat"].items():
            assert cell["status"] in ("ok", "gap", "n/a"), (row["name"], column, cell)
            if cell["status"] != "ok":
                assert cell["note"], (row["name"], column)  # the reason is in the report


def test_catalog_gaps_are_the_documented_ones(catalog_rows):
    gaps = {(row["name"].split("::")[1], column) for row in catalog_rows
            for column, cell in row["report"]["compat"].items() if cell["status"] == "gap"}
    columns = {column for _, column in gaps}
    assert columns == {"export", "compile"}
    # Estimators (the exported program trains with another gradient) and ops whose forward
    # runs without a graph: export only. checkpoint_sequential: compile.
    assert ("checkpoint_sequential", "compile") in gaps
    assert ("sign_ste[sign_ste]", "export") in gaps
    assert ("attention[plain]", "export") in gaps
    assert not any(name.startswith(("swish", "clipped_relu", "fused_linear_relu",
                                    "logsumexp")) for name, _ in gaps)
    docs = Path(inspect.getfile(G)).parents[2] / "docs" / "ops.md"
    text = docs.read_text()
    assert "## Deployment" in text
    for reason in ("estimator", "without an autograd graph", "get_rng_state"):
        assert reason in text, reason


@pytest.mark.parametrize("regularization", ["l2", "kl"])
@pytest.mark.parametrize("op", ["soft_rank", "soft_sort"])
def test_exported_soft_sort_trains_with_its_gradient(op, regularization):
    # The catalog's reference implementation (plain differentiable PAV), not the op, decides.
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from catalog import _soft_rank_reference, _soft_sort_reference

    ref = {"soft_rank": _soft_rank_reference, "soft_sort": _soft_sort_reference}[op]
    fn = getattr(G, op)

    class Model(nn.Module):
        def forward(self, x):
            return fn(x, regularization, 0.5)

    gen = torch.Generator().manual_seed(3)
    x = torch.randn(3, 9, generator=gen, dtype=torch.float64).mul(2).requires_grad_()
    v = torch.randn(3, 9, generator=gen, dtype=torch.float64)
    program = torch.export.export(Model(), (x,), strict=False)
    assert f"gradsmith.isotonic_{regularization}" in str(program.graph)  # one opaque node
    (got,) = torch.autograd.grad((program.module()(x) * v).sum(), x)
    xr = x.detach().clone().requires_grad_()
    (want,) = torch.autograd.grad((ref(xr, regularization, 0.5) * v).sum(), xr)
    torch.testing.assert_close(got, want, atol=1e-9, rtol=1e-9)


def test_isotonic_ops_autograd_formulas_against_finite_differences():
    gen = torch.Generator().manual_seed(5)
    y = torch.randn(3, 7, generator=gen, dtype=torch.float64).requires_grad_()
    w = torch.randn(3, 7, generator=gen, dtype=torch.float64).requires_grad_()
    w_row = torch.randn(1, 7, generator=gen, dtype=torch.float64).requires_grad_()

    def l2(y):
        return torch.ops.gradsmith.isotonic_l2(y)[0]

    def kl(y, w):
        return torch.ops.gradsmith.isotonic_kl(y, w)[0]

    for f, args in ((l2, (y,)), (kl, (y, w)), (kl, (y, w_row))):  # w_row: broadcast w
        assert torch.autograd.gradcheck(f, args)
        assert torch.autograd.gradgradcheck(f, args)
    for op, args in ((torch.ops.gradsmith.isotonic_l2, (y,)),
                     (torch.ops.gradsmith.isotonic_kl, (y, w))):
        torch.library.opcheck(op, args)


def _modules():
    """One instance of every gradsmith.nn Module, built with the constructor's defaults."""
    made = []
    for name in gnn.__all__:
        cls = getattr(gnn, name)
        if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
            continue
        extra = {"FusedLinearReLU": (4, 3), "SoftThreshold": (0.5,), "Attention": (4, 2),
                 "CheckpointedSequential": (nn.Linear(4, 4), nn.Tanh())}.get(name, ())
        made.append(pytest.param(cls(*extra), id=name))
    return made


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
@pytest.mark.parametrize("module", _modules())
def test_torchscript_is_refused_with_what_works_instead(module):
    name = type(module).__name__
    for target in (module, nn.Sequential(nn.Identity(), module)):
        with pytest.raises(GradsmithError, match=rf"TorchScript cannot compile a "
                                                 rf"torch.autograd.Function, and {name}"):
            torch.jit.script(target)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_torchscript_refusal_is_real_torchscript_cannot_compile_a_function():
    # Without the refusal TorchScript fails deep in its compiler on Function.apply.
    class Plain(nn.Module):
        def forward(self, x):
            return G.swish(x, 1.0)

    with pytest.raises(Exception, match="(?i)python|function|apply|compile"):
        torch.jit.script(Plain())


def _float_model():
    torch.manual_seed(0)
    return nn.Sequential(gnn.FusedLinearReLU(8, 6), nn.Linear(6, 3), gnn.FusedLinearReLU(3, 2))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.ao.quantization (torch 2.13)
@pytest.mark.filterwarnings("ignore:.*quantized tensor creation")
def test_torch_quantize_dynamic_silently_skips_fused_linear_relu_and_ours_does_not():
    model = _float_model()
    plain = torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
    assert type(plain[0]) is gnn.FusedLinearReLU  # left in float: the reported problem
    ours = gnn.quantize_dynamic(model)
    assert type(model[0]) is gnn.FusedLinearReLU  # the float model is untouched
    names = [m._get_name() for m in ours.modules()]
    assert names.count("DynamicQuantizedLinear") == 3
    assert "FusedLinearReLU" not in names
    x = torch.randn(16, 8, generator=torch.Generator().manual_seed(1))
    want = model(x).detach()
    # Reference: the same model built from plain Linear + ReLU, quantized by torch itself.
    reference = nn.Sequential(nn.Sequential(nn.Linear(8, 6), nn.ReLU()), nn.Linear(6, 3),
                              nn.Sequential(nn.Linear(3, 2), nn.ReLU()))
    reference[0][0].load_state_dict(model[0].state_dict())
    reference[1].load_state_dict(model[1].state_dict())
    reference[2][0].load_state_dict(model[2].state_dict())
    torch.testing.assert_close(reference(x), want)
    quantized_reference = torch.ao.quantization.quantize_dynamic(reference, {nn.Linear})
    torch.testing.assert_close(ours(x), quantized_reference(x))
    assert float((ours(x) - want).abs().max()) < 0.05 * float(want.abs().max())


@pytest.mark.parametrize(("model", "match"), [
    ("not a model", "model must be a torch.nn.Module, got str"),
    (gnn.FusedLinearReLU(2, 2), "pass the model that contains the FusedLinearReLU"),
])
def test_quantize_dynamic_bad_input_says_what_to_pass(model, match):
    with pytest.raises(GradsmithError, match=match):
        gnn.quantize_dynamic(model)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("op", ["swish", "fused_linear_relu", "logsumexp", "attention"])
def test_catalog_passes_check_on_cuda(op):
    from gradsmith._example import examples_of
    from gradsmith.checker import check

    fn = getattr(G, op)
    ex = examples_of(fn)[0]
    args = tuple(a.cuda() if isinstance(a, torch.Tensor) else a for a in ex.make_args())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = check(fn, *args, surrogate=ex.surrogate, compat=True, **ex.options)
    assert report.passed, str(report)
    assert report.compat["autocast"]["status"] in ("ok", "gap"), str(report)
