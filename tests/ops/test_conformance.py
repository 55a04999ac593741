"""Conformance suite over the whole op catalog (``catalog.CATALOG``).

For every op: values and gradients against plain PyTorch in float64, float32 and bfloat16,
second derivatives, gradcheck/gradgradcheck, vmap against a loop (values and per-sample
gradients), torch.compile(fullgraph=True) against eager, autocast, and ``gradsmith.check``.
The compile tests are the slow ones (one compilation per op): select or skip them with
``-k compile`` / ``-k "not compile"``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import conformance as H  # noqa: E402
from catalog import CATALOG  # noqa: E402

DTYPE_CASES = [pytest.param(case, dtype, id=f"{case.id}-{str(dtype).removeprefix('torch.')}")
               for case in CATALOG for dtype in case.dtypes]


def _ids(cases):
    return [pytest.param(c, id=c.id) for c in cases]


@pytest.mark.parametrize(("case", "dtype"), DTYPE_CASES)
def test_value_and_gradient_match_reference(case, dtype):
    value, grads = H.value_and_grads(case, case.fn, dtype)
    ref_value, _ = H.value_and_grads(case, case.reference, dtype)
    _, ref_grads = H.value_and_grads(case, case.surrogate or case.reference, dtype)
    assert value.dtype == ref_value.dtype
    H.assert_close(value, ref_value, dtype, f"{case.id} value")
    H.assert_close(grads, ref_grads, dtype, f"{case.id} gradient")


@pytest.mark.parametrize("case", _ids(c for c in CATALOG if not c.once_differentiable))
def test_second_derivatives_match_reference(case):
    got = H.second_order(case, case.fn)
    expected = H.second_order(case, case.surrogate or case.reference)
    H.assert_close(got, expected, torch.float64, f"{case.id} double backward")


@pytest.mark.parametrize("case", _ids(c for c in CATALOG if c.surrogate is None))
def test_gradcheck_and_gradgradcheck(case):
    args = H.make_args(case, torch.float64)
    tensors, fn = H.split_constants(case, args)

    def seeded(*ts):
        return H.call(case, fn, ts)

    assert torch.autograd.gradcheck(seeded, tensors)
    if not case.once_differentiable:
        assert torch.autograd.gradgradcheck(seeded, tensors)


@pytest.mark.parametrize("shared", [False, True], ids=["all-batched", "shared-params"])
@pytest.mark.parametrize("case", _ids(c for c in CATALOG if c.vmap))
def test_vmap_matches_loop(case, shared):
    (value_v, grads_v), (value_l, grads_l) = H.vmap_and_loop(case, shared=shared)
    H.assert_close(value_v, value_l, torch.float64, f"{case.id} vmap value")
    H.assert_close(grads_v, grads_l, torch.float64, f"{case.id} vmap per-sample gradient")


# Dynamo and Inductor trip torch's own deprecation warnings while compiling (torch 2.13:
# instantiating autograd.Function, torch.jit.script_method); the ops raise none.
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("case", _ids(c for c in CATALOG if c.compile))
def test_compile_fullgraph_matches_eager(case):
    torch._dynamo.reset()
    args = H.make_args(case, torch.float32)
    tensors, fn = H.split_constants(case, args)
    compiled = torch.compile(fn, fullgraph=True)
    # Inductor has its own RNG unless told to fall back to eager's: needed to compare samples.
    with torch._inductor.config.patch(fallback_random=True):
        out_c = H.call(case, compiled, tensors)
        out_e = H.call(case, fn, tensors)
        v = H.cotangent(out_e, 7)
        grads_c = torch.autograd.grad(out_c, tensors, v, allow_unused=True,
                                      materialize_grads=True)
        grads_e = torch.autograd.grad(out_e, tensors, v, allow_unused=True,
                                      materialize_grads=True)
    H.assert_close(out_c, out_e, torch.float32, f"{case.id} compiled value")
    H.assert_close(grads_c, grads_e, torch.float32, f"{case.id} compiled gradient")


@pytest.mark.parametrize("case", _ids(CATALOG))
def test_autocast_bfloat16_forward_and_backward(case):
    results = []
    for fn in (case.fn, case.reference if case.surrogate is None else case.surrogate):
        args = H.make_args(case, torch.float32)
        inputs = [args[i] for i in H.tensor_positions(args)]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = H.call(case, fn, args)
            v = H.cotangent(out, 3)
            grads = torch.autograd.grad(out, inputs, v, allow_unused=True,
                                        materialize_grads=True)
        for t, g in zip(inputs, grads):
            assert g.dtype == t.dtype and g.shape == t.shape
            assert torch.isfinite(g).all()
        results.append((out, grads))
    (out, grads), (ref_out, ref_grads) = results
    if case.surrogate is None:
        assert out.dtype == ref_out.dtype
        H.assert_close(out.float(), ref_out.float(), torch.bfloat16, f"{case.id} value")
    H.assert_close(grads, ref_grads, torch.bfloat16, f"{case.id} gradient")


@pytest.mark.parametrize("case", _ids(CATALOG))
def test_gradsmith_check_passes(case):
    from gradsmith.checker import check

    args = H.make_args(case, torch.float64)
    options = dict(case.check_options)
    if case.random:
        options.setdefault("seed", H.RANDOM_SEED)
    report = check(case.fn, *args, surrogate=case.surrogate, **options)
    assert report.passed, str(report)
    if "checks" not in options:  # the gradient itself was judged, not only side properties
        assert ("surrogate" if case.surrogate else "gradients") in report.checks, str(report)


def _registered():
    from gradsmith._example import examples_of

    seen = {}
    for case in CATALOG:
        seen.setdefault(case.fn.__name__, case.fn)
    return [pytest.param(fn, ex, id=f"{name}[{ex.name}]")
            for name, fn in seen.items() for ex in examples_of(fn)]


@pytest.mark.parametrize(("fn", "ex"), _registered())
def test_registered_examples_pass_check(fn, ex):
    from gradsmith.checker import check

    report = check(fn, *ex.make_args(), surrogate=ex.surrogate, **ex.options)
    assert report.passed, str(report)
    if "checks" not in ex.options:
        assert ("surrogate" if ex.surrogate else "gradients") in report.checks, str(report)
