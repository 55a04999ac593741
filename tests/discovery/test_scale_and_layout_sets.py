"""Zero-configuration input sets at a realistic scale and with a non-contiguous index (issue 18's
mutation study): inputs were small and near zero, so a backward that is infinite outside
[-3, 3] passed; index tensors were always contiguous, so a backward doing ``idx.view(-1)``
passed. Reduced cases, written here."""

import torch
import torch.nn.functional as F
from torch.autograd import Function

import gradsmith
from gradsmith.checkrun.sets import merge as _merge
from gradsmith.checkrun.sets import variant_checks as _variant_checks
from gradsmith.discovery.synthesize import Synthesized, synthesize


def _zero_config(fn):
    """The report ``gradsmith check`` builds on synthesised inputs: the first set, then each
    variant's findings merged in (as :func:`gradsmith.checkrun.sets.check_sets`)."""
    found = synthesize(fn)
    assert isinstance(found, Synthesized), found
    report = gradsmith.check(fn, *found.args)
    for index, variant in enumerate(found.variants, start=1):
        _merge(report, index, variant.change,
               gradsmith.check(fn, *variant.args, checks=_variant_checks({})))
    return found, report


class WindowedCube(Function):
    """x ** 3 with its gradient computed through a normaliser that is NaN outside [-3, 3]."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        window = torch.sqrt(9 - x ** 2)
        return g * 3 * x ** 2 * window / window


class Cube(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * 3 * x ** 2


def _embedding(flatten):
    class Lookup(Function):
        """weight[idx]; backward scatters g into the rows idx names."""

        @staticmethod
        def forward(ctx, weight, idx):
            ctx.save_for_backward(idx)
            ctx.rows = weight.shape[0]
            return F.embedding(idx, weight)

        @staticmethod
        def backward(ctx, g):
            idx, = ctx.saved_tensors
            gw = g.new_zeros(ctx.rows, g.shape[-1])
            gw.index_add_(0, flatten(idx), g.reshape(-1, g.shape[-1]))
            return gw, None

    return Lookup


def test_a_backward_infinite_outside_three_is_a_nan_gradient_on_the_wide_set():
    x = synthesize(WindowedCube).args[0]
    assert bool((x.abs() < 3).all())  # the first set never leaves the window: it passed
    found, report = _zero_config(WindowedCube)
    assert "values 3 * randn: x" in [v.change for v in found.variants]
    nan = [f for f in report.findings if f.code == "nan-gradient"]
    assert nan and all(f.details["inputs"].startswith("values 3 * randn") for f in nan)
    assert not report.passed
    wide = next(v for v in found.variants if v.change.startswith("values 3 * randn")).args[0]
    assert float(wide.detach().abs().max()) > 3  # the hand reason it fails: x ** 2 > 9 somewhere


def test_a_correct_function_passes_on_the_wide_set_and_matches_autograd():
    found, report = _zero_config(Cube)
    assert report.passed, report
    wide = next(v for v in found.variants if v.change.startswith("values 3 * randn")).args[0]
    got, = torch.autograd.grad(Cube.apply(wide).sum(), wide)
    want, = torch.autograd.grad((wide ** 3).sum(), wide)  # autograd of the same expression
    torch.testing.assert_close(got, want)


def test_an_index_view_in_backward_fails_on_the_non_contiguous_set():
    found, report = _zero_config(_embedding(lambda idx: idx.view(-1)))
    changes = [v.change for v in found.variants]
    assert "non-contiguous index: idx" in changes
    index = found.variants[changes.index("non-contiguous index: idx")].args[1]
    assert not index.is_contiguous()
    errors = [f for f in report.findings if f.severity == "error"]
    assert errors and all(f.details.get("inputs") == "non-contiguous index: idx" for f in errors)
    assert not report.passed


def test_an_index_reshape_in_backward_passes_and_matches_autograd():
    lookup = _embedding(lambda idx: idx.reshape(-1))
    found, report = _zero_config(lookup)
    assert report.passed, report
    variant = next(v for v in found.variants if v.change == "non-contiguous index: idx")
    weight, idx = variant.args
    got, = torch.autograd.grad(lookup.apply(weight, idx).sum(), weight)
    want, = torch.autograd.grad(F.embedding(idx, weight).sum(), weight)
    torch.testing.assert_close(got, want)
