"""The deployment checks on Functions broken for one deployment reason, and on correct ones.

Each broken Function's failure is first reproduced with plain PyTorch (no gradsmith), so the
test proves the case really breaks on the pinned torch; then gradsmith must report it in the
right matrix column, and only there. Correct Functions must get no warning or error and an
all-green matrix (``n/a`` only where torch itself cannot). One ``gradsmith.check`` per
Function, shared by all tests (``reports``), keeps compilation to one per Function.
"""

from __future__ import annotations

import warnings

import deploy_cases as D
import pytest
import torch
from torch.utils.checkpoint import checkpoint

from gradsmith.checker import check

# Every deployment column is checked for every case: the listed ones must be flagged, every
# other one must be ok (or n/a where the note says torch itself cannot).
BROKEN = {
    "BrokenLoggingForward": {"compile": {"compile-graph-break"}},
    "BrokenItemBranch": {"compile": {"compile-graph-break"}, "export": {"export-error"},
                         "torch.func": {"vmap-error"}},
    "BrokenCompilePath": {"compile": {"compile-mismatch"}},
    "BrokenClassmethodForward": {"compile": {"compile-graph-break"},
                                 "torch.func": {"func-needs-setup-context"}},
    "BrokenExportedSTE": {"export": {"export-drops-backward"}},
    "BrokenNumpyForward": {"export": {"export-error"}, "torch.func": {"vmap-error"}},
    "BrokenAutocastMatmul": {"autocast": {"autocast-error"}},
    "BrokenAutocastGramVariance": {"autocast": {"autocast-inaccurate"}},
    "BrokenNaiveVariance": {"float32": {"precision-loss"}},
    "BrokenFloat32Internals": {"float32": {"float64-crash"}},
    "BrokenFloat32Backward": {"float32": {"float64-crash"}},
    "InplaceExp": {"compile": {"compile-mismatch"}, "checkpoint": {"checkpoint-error"},
                   "torch.func": {"func-needs-setup-context"}},
    "BrokenOldStyleTanh": {"torch.func": {"func-needs-setup-context"}},
    "BrokenNoVmapRule": {"torch.func": {"vmap-no-rule"}},
    "broken_no_fake_sin": {"compile": {"custom-op-no-fake"}, "export": {"custom-op-no-fake"}},
    "broken_fake_rowsum": {"compile": {"custom-op-fake-mismatch"},
                           "export": {"custom-op-fake-mismatch"}},
}
OK = ["OkAutocastMatmul", "OkAutocastCast", "OkVariance", "OkDropout", "OkSwish", "ok_sin"]
# torch's own limits and things that do not apply: allowed n/a cells of correct Functions.
ALLOWED_NA = {("OkDropout", "float32"), ("OkSwish", "compile"), ("ok_sin", "torch.func"),
              ("broken_no_fake_sin", "torch.func"), ("broken_fake_rowsum", "torch.func")}
DEPLOY_COLUMNS = ("compile", "export", "autocast", "float32", "checkpoint", "torch.func")


@pytest.fixture(scope="module")
def reports():
    found = {}
    for name in [*BROKEN, *OK]:
        found[name] = check(getattr(D, name), compat=True)
    return found


@pytest.mark.parametrize("name", list(BROKEN))
def test_broken_function_is_flagged_in_its_column_only(reports, name):
    report = reports[name]
    expected = BROKEN[name]
    assert report.compat["eager"]["status"] == "ok", report
    for column in DEPLOY_COLUMNS:
        cell = report.compat[column]
        if column in expected:
            assert cell["status"] in ("warn", "fail"), (column, report)
            assert expected[column] <= set(cell["codes"]), (column, cell)
        else:
            want = "n/a" if (name, column) in ALLOWED_NA else "ok"
            assert cell["status"] == want, (column, cell, str(report))


@pytest.mark.parametrize("name", OK)
def test_correct_compatible_function_is_not_flagged(reports, name):
    report = reports[name]
    loud = [f for f in report.findings if f.severity in ("error", "warning")]
    assert loud == [], str(report)
    for column in ("eager", *DEPLOY_COLUMNS):
        cell = report.compat[column]
        want = "n/a" if (name, column) in ALLOWED_NA else "ok"
        assert cell["status"] == want, (column, cell)
    # the onnx column is opt-in: not requested here, so it says so instead of passing
    assert report.compat["onnx"]["status"] == "n/a", report.compat["onnx"]
    assert "not requested" in report.compat["onnx"]["note"]


# --- the plain-PyTorch reproductions: each case really breaks on this torch -----------------

def _x(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


def _compile(fn):
    torch._dynamo.reset()
    return torch.compile(fn, backend="aot_eager", fullgraph=True)


def test_torch_export_trains_an_ste_with_zero_gradient():
    class Model(torch.nn.Module):
        def forward(self, x):
            return D.BrokenExportedSTE.apply(x)

    x = _x(4, 5).clamp(-0.9, 0.9).requires_grad_()
    program = torch.export.export(Model(), (x,))
    (grad,) = torch.autograd.grad(program.module()(x).sum(), x)
    (eager,) = torch.autograd.grad(D.BrokenExportedSTE.apply(x).sum(), x)
    assert float(grad.abs().max()) == 0.0
    assert float(eager.abs().min()) == 1.0  # |x| <= 1 everywhere: the clipped STE passes 1


def test_autocast_backward_without_custom_bwd_mixes_dtypes():
    x, w = _x(4, 3).float().requires_grad_(), _x(3, 5).float().requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = D.BrokenAutocastMatmul.apply(x, w)
    with pytest.raises(RuntimeError, match="same dtype"):
        out.sum().backward()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = D.OkAutocastMatmul.apply(x, w)
    out.sum().backward()
    assert x.grad.dtype == torch.float32


def test_gram_variance_is_inaccurate_under_bfloat16_autocast_only():
    x = (_x(4, 32) + 30.0).float()
    exact = x.double().var(-1, unbiased=False)
    plain = D.BrokenAutocastGramVariance.apply(x).double()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mixed = D.BrokenAutocastGramVariance.apply(x).double()
    assert float((plain - exact).abs().max() / exact.abs().max()) < 1e-3
    assert float((mixed - exact).abs().max() / exact.abs().max()) > 0.1


def test_naive_variance_loses_its_digits_in_float32_only():
    x = D._offset()[0]
    exact = torch.var(x, unbiased=False)
    for dtype, bad in ((torch.float64, False), (torch.float32, True)):
        got = D.BrokenNaiveVariance.apply(x.to(dtype)).double()
        good = D.OkVariance.apply(x.to(dtype)).double()
        rel = float((got - exact).abs() / exact)
        assert (rel > 0.02) is bad, (dtype, rel)
        assert float((good - exact).abs() / exact) < 1e-5


def test_users_bfloat16_is_checked_too_not_only_float32():
    # Offset 10: E[x^2] - E[x]^2 keeps float32's digits but loses bfloat16's.
    x = (D._x(16) + 10.0).to(torch.bfloat16)
    exact = torch.var(x.double(), unbiased=False)
    for dtype, bad in ((torch.float32, False), (torch.bfloat16, True)):
        rel = float((D.BrokenNaiveVariance.apply(x.to(dtype)).double() - exact).abs() / exact)
        assert (rel > 0.1) is bad, (dtype, rel)  # JAX's bfloat16 tolerance is 1e-1
    report = check(D.BrokenNaiveVariance, x, checks=["precision"])
    flagged = [f for f in report.findings if f.check == "precision"]
    assert flagged and all("bfloat16" in f.message for f in flagged), str(report)
    assert report.compat["float32"]["status"] in ("warn", "fail")
    good = check(D.OkVariance, x, checks=["precision"])
    assert good.compat["float32"]["status"] == "ok", str(good)


def test_old_style_function_is_refused_by_torch_func():
    with pytest.raises(RuntimeError, match="setup_context"):
        torch.func.grad(lambda x: D.BrokenOldStyleTanh.apply(x).sum())(_x(3))


def test_float32_internals_crash_in_float64():
    with pytest.raises(RuntimeError, match="same dtype"):
        D.BrokenFloat32Internals.apply(_x(2, 6))
    assert D.BrokenFloat32Internals.apply(_x(2, 6).float()).dtype == torch.float32


def test_float32_backward_crashes_in_float64_only(reports):
    x = _x(2, 6).requires_grad_()
    with pytest.raises(RuntimeError, match="same dtype"):
        D.BrokenFloat32Backward.apply(x).sum().backward()
    x32 = _x(2, 6).float().requires_grad_()
    D.BrokenFloat32Backward.apply(x32).sum().backward()
    torch.testing.assert_close(x32.grad, torch.full_like(x32, 2.0))
    (f,) = [f for f in reports["BrokenFloat32Backward"].findings if f.code == "float64-crash"]
    assert f.details["stage"] == "backward" and f.details["checked_in"] == "float32"


def test_compile_graph_breaks_on_logging_and_item():
    for cls in (D.BrokenLoggingForward, D.BrokenItemBranch):
        with pytest.raises(Exception, match="Logger|item|data-dependent"):
            _compile(cls.apply)(_x(3, 4).requires_grad_())


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_compile_differentiates_an_inplace_function_as_identity():
    x = _x(3, 4).requires_grad_()
    (eager,) = torch.autograd.grad(D.InplaceExp.apply(x.clone()).sum(), x)
    (compiled,) = torch.autograd.grad(_compile(D.InplaceExp.apply)(x.clone()).sum(), x)
    torch.testing.assert_close(eager, x.detach().exp())
    torch.testing.assert_close(compiled, torch.ones_like(compiled))


def test_checkpoint_refuses_an_inplace_function_and_replays_dropout():
    x = _x(3, 4).requires_grad_()
    with pytest.raises(RuntimeError, match="inplace"):
        checkpoint(D.InplaceExp.apply, x.clone(), use_reentrant=False).sum().backward()

    def grad(preserve):
        torch.manual_seed(0)
        out = checkpoint(lambda t: D.OkDropout.apply(t)[0], x, use_reentrant=False,
                         preserve_rng_state=preserve)
        return torch.autograd.grad(out.sum(), x)[0]

    torch.manual_seed(0)
    (plain,) = torch.autograd.grad(D.OkDropout.apply(x)[0].sum(), x)
    torch.testing.assert_close(grad(True), plain)
    assert not torch.equal(grad(False), plain)


def test_checkpoint_recomputes_a_private_generator_mask_wrongly():
    x = _x(3, 6).requires_grad_()
    # Eager: backward uses the mask forward drew (the output's zeros), so it is right.
    out, keep = D.BrokenPrivateGeneratorDropout.apply(x)
    (grad,) = torch.autograd.grad(out.sum(), x)
    torch.testing.assert_close(grad, keep * 2)
    # Checkpointed: forward runs again in backward and draws another mask.
    out = checkpoint(lambda t: D.BrokenPrivateGeneratorDropout.apply(t)[0], x,
                     use_reentrant=False)
    (grad,) = torch.autograd.grad(out.sum(), x)
    assert not torch.equal(grad, (out != 0).to(grad.dtype) * 2)


def test_unreplayable_randomness_is_flagged_under_checkpoint_and_compared_nowhere_else():
    report = check(D.BrokenPrivateGeneratorDropout, compat=True)
    assert "nondeterministic-forward" in report.codes("warning")  # eager says why
    assert report.compat["checkpoint"]["status"] == "fail"
    assert "checkpoint-mismatch" in report.compat["checkpoint"]["codes"]
    # Dynamo really cannot trace torch.rand(generator=...): that refusal does not depend on
    # the values and stays; every value comparison is dropped (it would compare two draws).
    assert report.compat["compile"]["codes"] == ["compile-graph-break"]
    for column in ("export", "autocast", "torch.func"):
        cell = report.compat[column]
        assert cell["status"] == "n/a", (column, cell, str(report))
        assert "not compared" in cell["note"], cell
    assert not {"vmap-mismatch", "func-mismatch", "export-mismatch"} & report.codes()
    # The same Function drawing from torch's default generator is compared everywhere.
    ok = check(D.OkDropout, compat=True)
    assert "deploy-not-comparable" not in ok.codes()


def test_custom_op_without_fake_kernel_cannot_compile():
    with pytest.raises(Exception, match="fake"):
        _compile(D.broken_no_fake_sin)(_x(3, 4))
    result = torch.library.opcheck(D.broken_fake_rowsum, (_x(3, 4),), raise_exception=False)
    assert "Shapes" in str(result["test_faketensor"])


def test_vmap_refuses_a_setup_context_function_without_a_vmap_rule():
    batch = _x(3, 4)
    with pytest.raises(RuntimeError, match="generate_vmap_rule"):
        torch.func.vmap(D.BrokenNoVmapRule.apply)(batch)
    torch.func.grad(lambda x: D.BrokenNoVmapRule.apply(x).sum())(batch)  # grad itself works

    class WithRule(D.BrokenNoVmapRule):
        generate_vmap_rule = True

    torch.testing.assert_close(torch.func.vmap(WithRule.apply)(batch), torch.sin(batch))


def test_missing_vmap_rule_hint_is_verified_and_the_class_restored(reports):
    (f,) = [f for f in reports["BrokenNoVmapRule"].findings if f.code == "vmap-no-rule"]
    assert f.details["generate_vmap_rule_fixes"] is True
    assert "generate_vmap_rule = True" in f.hint and "verified" in f.hint
    assert "generate_vmap_rule" not in vars(D.BrokenNoVmapRule)  # the trial was undone
    plain = check(D.BrokenNoVmapRule, compat=False)  # a deployment question: skipped
    assert "vmap-no-rule" not in plain.codes() and "vmap" in plain.skipped


def test_missing_vmap_rule_that_generate_cannot_fix_asks_for_a_vmap_staticmethod():
    class ItemScale(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x * float(x.abs().max().item() > 0)  # .item(): no generated vmap rule

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.scale = float(inputs[0].abs().max().item() > 0)

        @staticmethod
        def backward(ctx, g):
            return g * ctx.scale

    with pytest.raises(RuntimeError):
        torch.func.vmap(type("R", (ItemScale,), {"generate_vmap_rule": True}).apply)(_x(2, 3))
    report = check(ItemScale, _x(3, 4), checks=["vmap"])
    (f,) = [f for f in report.findings if f.code == "vmap-no-rule"]
    assert f.details["generate_vmap_rule_fixes"] is False
    assert "write a vmap staticmethod" in f.hint


def test_vmap_refuses_random_forward_by_default():
    with pytest.raises(RuntimeError, match="randomness"):
        torch.func.vmap(D.OkDropout.apply)(_x(2, 3))


# --- what the findings say --------------------------------------------------------------------

def test_graph_break_names_the_line_and_the_reason(reports):
    (f,) = [f for f in reports["BrokenLoggingForward"].findings
            if f.code == "compile-graph-break"]
    assert f.details["where"]["file"].endswith("deploy_cases.py")
    assert "_log.debug" in f.details["where"]["source"]
    assert "logging" in f.details["reason"].lower()


def test_classmethod_function_is_told_to_use_staticmethod(reports):
    (f,) = [f for f in reports["BrokenClassmethodForward"].findings
            if f.code == "compile-graph-break"]
    assert f.details["methods"] == ["forward", "backward"]
    assert "@staticmethod" in f.hint
    # The independent check: the same Function with static methods compiles, as written not.
    class StaticSin(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.sin(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * torch.cos(x)

    x = _x(3, 4).requires_grad_()
    _compile(StaticSin.apply)(x).sum().backward()
    torch.testing.assert_close(x.grad, torch.cos(x.detach()))
    with pytest.raises(Exception, match="Observed exception|bind"):
        _compile(D.BrokenClassmethodForward.apply)(x)


def test_autocast_hint_verifies_the_custom_amp_fix(reports):
    (f,) = [f for f in reports["BrokenAutocastMatmul"].findings if f.code == "autocast-error"]
    assert f.details["stage"] == "backward"
    assert f.details["custom_amp_fixes"] is True
    assert "setup_context with @torch.amp.custom_fwd" in f.hint


def test_old_style_hint_carries_the_rewrite(reports):
    (f,) = [f for f in reports["BrokenOldStyleTanh"].findings
            if f.code == "func-needs-setup-context"]
    rewrite = f.details["rewrite"]
    assert "def forward(x):" in rewrite
    assert "def setup_context(ctx, inputs, output):" in rewrite
    assert "ctx.save_for_backward(y)" in rewrite
    # y is computed in forward; the rewrite binds it from the output instead of losing it.
    assert "y = output" in rewrite


def test_torch_limits_are_info_not_failures(reports):
    codes = reports["ok_sin"].codes("info")
    assert "func-unsupported-by-torch" in codes
    assert reports["ok_sin"].passed
    assert "compile-unsupported-by-torch" in reports["OkSwish"].codes("info")


def test_random_function_is_checked_under_vmap_with_randomness(reports):
    report = reports["OkDropout"]
    assert "vmap" in report.checks
    assert {"vmap-randomness", "checkpoint-needs-rng-state"} <= report.codes("info")


def test_export_drop_says_zero_gradients_and_what_to_do(reports):
    (f,) = [f for f in reports["BrokenExportedSTE"].findings
            if f.code == "export-drops-backward"]
    assert f.details["zero"] is True
    assert "custom_op" in f.hint and "register_autograd" in f.hint


def test_dynamo_state_does_not_leak_between_functions():
    # Every Function's apply shares one code object: without a reset the ninth compiled
    # Function would hit the recompile limit and run eagerly, hiding its compile mismatch.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in ["OkVariance", "BrokenNaiveVariance", "OkAutocastMatmul",
                     "BrokenAutocastMatmul", "BrokenOldStyleTanh", "OkDropout",
                     "BrokenExportedSTE", "BrokenLoggingForward", "OkSwish"]:
            check(getattr(D, name), checks=["compile"])
    report = check(D.BrokenCompilePath, checks=["compile"])
    assert "compile-mismatch" in report.codes("error")
