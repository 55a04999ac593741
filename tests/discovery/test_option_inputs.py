"""Named options get the words the code accepts (issue 18, torch-interpol).

A reduced case, written here, of how a library of spline filters states its options: a boundary
condition and an order go through ``make_list`` into a helper that loops over them and compares
each item with tuples of synonyms (``b in ('dct1', 'mirror')``), beside ``isinstance(b, int)``;
the forward is decorated (``@custom_fwd``), so its ``__globals__`` are torch's, not the
module's. Zero-config gave both options the float 0.1 (SKIP: "Unknown boundary condition 0.1").
Like a spline prefilter, the forward is the identity at the first order, and the planted
defect shows only for one boundary at a higher order: changing one option at a time misses it.
"""

from __future__ import annotations

import textwrap

import pytest
import torch

from gradsmith.checkrun.session import run_check
from gradsmith.discovery import Source, Synthesized, synthesize

FILTERS = '''
import torch
from torch.amp import custom_fwd
from torch.autograd import Function


def make_list(x):
    if not isinstance(x, (list, tuple)):
        x = [x]
    return list(x)


def bound_codes(bound):
    codes = []
    for b in bound:
        b = b.lower() if isinstance(b, str) else b
        if b in ('replicate', 'border'):
            codes.append(0)
        elif b in ('zero', 'zeros'):
            codes.append(1)
        elif b in ('dct2', 'reflect'):
            codes.append(2)
        elif b in ('dct1', 'mirror'):
            codes.append(3)
        elif isinstance(b, int):
            codes.append(b)
        else:
            raise ValueError(f'Unknown boundary condition {b}')
    return codes


def order_codes(order):
    codes = []
    for o in order:
        if o in ('nearest',):
            codes.append(0)
        elif o in ('linear',):
            codes.append(1)
        elif o in ('quadratic',):
            codes.append(2)
        elif o in ('cubic',):
            codes.append(3)
        else:
            raise ValueError(f'Unknown order {o}')
    return codes


def gain(b, o):
    return 1.0 + 0.1 * (b + 1) * o   # 1 (the identity) at order 0, like a spline prefilter


class Prefilter(Function):
    @staticmethod
    @custom_fwd(device_type='cuda')
    def forward(ctx, x, bound, order):
        b, o = bound_codes(make_list(bound))[0], order_codes(make_list(order))[0]
        ctx.k = gain(b, o)
        return x * ctx.k

    @staticmethod
    def backward(ctx, g):
        return g * ctx.k, None, None


class PrefilterWrongForMirror(Function):
    """backward assumes every boundary gives a symmetric filter; dct1 does not (here)."""

    @staticmethod
    @custom_fwd(device_type='cuda')
    def forward(ctx, x, bound, order):
        b, o = bound_codes(make_list(bound))[0], order_codes(make_list(order))[0]
        ctx.k, ctx.wrong = gain(b, o), gain(0 if b == 3 else b, o)
        return x * ctx.k

    @staticmethod
    def backward(ctx, g):
        return g * ctx.wrong, None, None
'''


@pytest.fixture(scope="module")
def module(tmp_path_factory):
    import importlib.util

    path = tmp_path_factory.mktemp("options") / "option_filters.py"
    path.write_text(textwrap.dedent(FILTERS))
    spec = importlib.util.spec_from_file_location("option_filters_case", path)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)  # source must be readable: the hints parse it
    loaded.path = path
    return loaded


def test_options_a_helper_compares_through_make_list_are_its_words(module):
    found = synthesize(module.Prefilter)
    assert isinstance(found, Synthesized), found
    _, bound, order = found.args
    assert (bound, order) == ("replicate", "nearest")
    changes = [v.change for v in found.variants]
    # one word of each group of synonyms first: each one another branch of the helper
    assert [c for c in changes if c.startswith("bound=")][:3] == [
        "bound='zero'", "bound='dct2'", "bound='dct1'"]
    assert "bound='dct1', order='cubic' (options together)" in changes


def test_a_defect_of_one_boundary_at_a_higher_order_fails_and_its_twin_passes(module):
    result = run_check([Source("file", str(module.path), "option_filters.py")], isolate=False)
    rows = {r["name"].split("::")[1]: r for r in result.rows}
    assert rows["Prefilter"]["verdict"] == "pass", rows["Prefilter"]["text"]
    bad = rows["PrefilterWrongForMirror"]
    assert bad["verdict"] == "fail", bad["text"]
    errors = [f for f in bad["report"]["findings"] if f["severity"] == "error"]
    assert any("bound='dct1', order='cubic'" in f["details"].get("inputs", "") for f in errors)
    # Independent reference: autograd of x * k for the gain at dct1 and cubic, against the
    # Function's own gradient there.
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    (ref,) = torch.autograd.grad((x * module.gain(3, 3)).sum(), x)
    (got,) = torch.autograd.grad(module.PrefilterWrongForMirror.apply(x, "dct1", "cubic").sum(),
                                 x)
    assert not torch.allclose(ref, got)
    (same,) = torch.autograd.grad(module.Prefilter.apply(x, "dct1", "cubic").sum(), x)
    torch.testing.assert_close(same, ref)


COUNTED = '''
import torch
from torch.autograd import Function


@torch.jit.script
def scaled_along(inp, factor: float, dim: int):
    for d in range(dim):             # dim counts the last dimensions filtered: -1 is none
        inp = inp * factor
    return inp


class FilterLast(Function):
    @staticmethod
    def forward(ctx, x, dim):
        opt = (2.0, dim)
        ctx.dim = dim
        return scaled_along(x, *opt)

    @staticmethod
    def backward(ctx, g):
        return g * 2.0 ** max(ctx.dim, 0), None


class FilterLastIdentityBackward(Function):
    """backward assumes the filter is the identity, which it is only for no dimensions."""

    @staticmethod
    def forward(ctx, x, dim):
        opt = (2.0, dim)
        return scaled_along(x, *opt)

    @staticmethod
    def backward(ctx, g):
        return g, None
'''


def test_a_dim_a_compiled_helper_counts_with_range_is_at_least_one(tmp_path):
    import importlib.util
    import warnings

    path = tmp_path / "counted_filters.py"
    path.write_text(textwrap.dedent(COUNTED))
    spec = importlib.util.spec_from_file_location("counted_filters_case", path)
    loaded = importlib.util.module_from_spec(spec)
    with warnings.catch_warnings():  # torch.jit.script is deprecated; the projects still use it
        warnings.simplefilter("ignore", DeprecationWarning)
        spec.loader.exec_module(loaded)
    found = synthesize(loaded.FilterLast)
    assert isinstance(found, Synthesized), found
    assert found.args[1] == 1 and "dim=1" in found.description
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        result = run_check([Source("file", str(path), "counted_filters.py")], isolate=False)
    rows = {r["name"].split("::")[1]: r for r in result.rows}
    assert rows["FilterLast"]["verdict"] == "pass", rows["FilterLast"]["text"]
    assert rows["FilterLastIdentityBackward"]["verdict"] == "fail"
    assert "gradient-mismatch" in {f["code"] for f in rows["FilterLastIdentityBackward"]
                                   ["report"]["findings"] if f["severity"] == "error"}
    # Independent reference: autograd of x * 2 (one dimension filtered).
    x = found.args[0].detach().clone().requires_grad_()
    (ref,) = torch.autograd.grad((x * 2.0).sum(), x)
    (got,) = torch.autograd.grad(loaded.FilterLast.apply(x, 1).sum(), x)
    torch.testing.assert_close(got, ref)
