"""A catalog example that declares its gradient (``surrogate=``/``intended=``) has it
verified: the declaration replaces the gradients check, so an example restricting ``checks=``
must keep the surrogate check, or its row compares backward with nothing (INCOMPLETE)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest
import torch

import gradsmith
import gradsmith.functional as F
import gradsmith.ops
from gradsmith._example import examples_of
from gradsmith.ops._pact import pact_surrogate
from gradsmith.ops._quant import lsq_surrogate


def _declaring_examples():
    modules = [F] + [importlib.import_module(m.name) for m in
                     pkgutil.iter_modules(gradsmith.ops.__path__, "gradsmith.ops.")]
    for module in modules:
        for name, obj in vars(module).items():
            for ex in examples_of(obj) if callable(obj) else ():
                if ex.surrogate is not None or ex.intended is not None:
                    yield f"{module.__name__}::{name}[{ex.name}]", ex


def test_every_declared_gradient_in_the_catalog_is_checked():
    found = dict(_declaring_examples())
    assert "gradsmith.functional::pact[pact-4bit]" in found  # the listing found the catalog
    unchecked = [name for name, ex in found.items()
                 if "checks" in ex.options and "surrogate" not in ex.options["checks"]]
    assert unchecked == []


@pytest.mark.parametrize("fn, surrogate", [(F.pact, pact_surrogate),
                                           (F.fake_quantize_lsq, lsq_surrogate)],
                         ids=["pact", "lsq"])
def test_quantizer_rows_pass_with_their_surrogate_compared(fn, surrogate):
    (ex,) = examples_of(fn)
    args = ex.make_args()
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    # Independent reference: backward equals the surrogate's autograd gradient.
    got = torch.autograd.grad(fn(*args).sum(), tensors)
    want = torch.autograd.grad(surrogate(*args).sum(), tensors)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
    report = gradsmith.check(fn, compat=False)
    assert report.passed and "surrogate" in report.checks, str(report)
