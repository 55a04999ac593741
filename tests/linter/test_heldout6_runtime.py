"""Corpus 6 (held-out, spent) reduced cases, run on CPU (issue 19).

References: autograd of the same computation written out of place, and the caller's tensor as
it was before the call (a clone).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURES = Path(__file__).parent / "fixtures"


def _package(name: str, module: str):
    """fixtures/<name> imported as a package; returns its submodule ``module``."""
    root = FIXTURES / name
    spec = importlib.util.spec_from_file_location(
        f"{name}_fixture", root / "__init__.py", submodule_search_locations=[str(root)])
    package = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = package
    try:
        spec.loader.exec_module(package)
        return importlib.import_module(f"{spec.name}.{module}")
    finally:
        for loaded in [n for n in sys.modules if n.startswith(spec.name)]:
            del sys.modules[loaded]


def _found(name: str) -> set[tuple[str, int, str, str]]:
    return {(Path(f.path).name, f.line, f.code, f.severity)
            for f in lint(FIXTURES / name, config=False)}


@pytest.fixture(scope="module")
def alias_layers():
    return _package("alias_callers", "layers")


def test_callers_through_an_imported_alias_pass_fresh_values_a_warning(alias_layers):
    """GS230's downgrade follows `all_reduce = CenterRows.apply` into the module importing
    it, and does not count torch.distributed.all_reduce(t) there as a call of the alias."""
    torch.manual_seed(0)
    x = torch.randn(4, 5)
    w = torch.randn(5, 6, requires_grad=True)
    out = alias_layers.centered_rows(x, w)  # the matmul saves x and w, not its output
    ref_w = w.detach().clone().requires_grad_()
    ref = x @ ref_w
    ref = ref - ref.mean(-1, keepdim=True)
    torch.testing.assert_close(out, ref)
    weights = torch.randn(4, 6)
    torch.testing.assert_close(torch.autograd.grad((out * weights).sum(), w)[0],
                               torch.autograd.grad((ref * weights).sum(), ref_w)[0])
    found = _found("alias_callers")
    assert ("comm.py", 11, "GS230", "warning") in found
    assert not any(line == 11 and code == "GS101" for _, line, code, _ in found)


def test_a_caller_through_an_imported_alias_reading_it_again_an_error(alias_layers):
    torch.manual_seed(1)
    x = torch.randn(4, 5) + 3.0
    before = x.clone()
    _, peak = alias_layers.centered_cols_and_peak(x)
    assert peak != before.abs().max(), "the caller read the value it passed"
    torch.testing.assert_close(peak, (before - before.mean(0, keepdim=True)).abs().max())
    assert ("comm.py", 24, "GS101", "error") in _found("alias_callers")


_CUTE_STAND_IN = '''"""Stand-in for CuTe DSL: compile() gives a kernel computing on numpy (autograd records
nothing), writing its last argument as a compiled kernel does."""

import torch


def compile(kernel, *args, **kwargs):
    def run(x, out):
        out.copy_(torch.from_numpy(x.detach().numpy() * kernel.factor))

    return run
'''


def test_backward_reaching_a_cute_kernel_loses_the_second_derivative(tmp_path, monkeypatch):
    """GS215 follows backward through module helpers to what `cute.compile` returns and to a
    custom op registered by the project's wrapper (`@kernel_op("ns::name", ...)`)."""
    root = FIXTURES / "cute_kernels"
    ops_path = root / "cutepkg" / "ops.py"
    marked = [i for i, line in enumerate(ops_path.read_text().splitlines(), 1)
              if "# GS215" in line]
    found = sorted(f.line for f in lint(root, config=False)
                   if f.code == "GS215" and f.path.endswith("ops.py"))
    assert found == marked and len(marked) == 3

    (tmp_path / "cutlass").mkdir()
    (tmp_path / "cutlass" / "__init__.py").write_text("")
    (tmp_path / "cutlass" / "cute.py").write_text(_CUTE_STAND_IN)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(root))
    for name in [n for n in sys.modules if n.split(".")[0] in ("cutlass", "cutepkg")]:
        monkeypatch.delitem(sys.modules, name)
    ops = importlib.import_module("cutepkg.ops")
    try:
        x = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64, requires_grad=True)
        (ref,) = torch.autograd.grad((x * 3.0).pow(2).sum(), x, create_graph=True)
        (ref2,) = torch.autograd.grad(ref.pow(2).sum(), x)
        torch.testing.assert_close(ref2, 2 * 18.0 * 18.0 * x.detach())  # by hand: (18x)^2
        for fn in (ops.Scale, ops.ScaleCompiled, ops.ScaleDirect):
            (g,) = torch.autograd.grad(fn.apply(x, 3.0).pow(2).sum(), x, create_graph=True)
            torch.testing.assert_close(g, ref.detach())  # the first derivative is right
            assert g.grad_fn is None  # no graph: a gradient penalty loses its term
        (g,) = torch.autograd.grad(ops.ScalePlain.apply(x, 3.0).pow(2).sum(), x,
                                   create_graph=True)
        (g2,) = torch.autograd.grad(g.pow(2).sum(), x)
        torch.testing.assert_close(g2, ref2)  # the near miss: torch code, differentiable
        (g,) = torch.autograd.grad(ops.ScaleOnce.apply(x, 3.0).pow(2).sum(), x,
                                   create_graph=True)
        with pytest.raises(RuntimeError, match="once_differentiable"):
            g.pow(2).sum().backward()  # the fix: it raises instead
    finally:
        for name in [n for n in sys.modules if n.split(".")[0] in ("cutlass", "cutepkg")]:
            del sys.modules[name]


_EXTENSION_STAND_IN = '''"""Stand-in for a compiled extension: computes on numpy (autograd records nothing)."""

import torch


def linear_bias_wgrad(x, g, need_bias):
    x, g = x.detach().numpy(), g.detach().numpy()
    return torch.from_numpy(g.T @ x), torch.from_numpy(g.sum(0)) if need_bias else None
'''


def test_extension_imported_in_backward_through_a_local_name(tmp_path, monkeypatch):
    path = FIXTURES / "local_extension.py"
    found = [(f.line, f.code) for f in lint(path, config=False) if f.code == "GS215"]
    assert found == [(27, "GS215"), (70, "GS215")]  # not DenseTorch

    (tmp_path / "fused_dense_lib.py").write_text(_EXTENSION_STAND_IN)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "fused_dense_lib", raising=False)
    spec = importlib.util.spec_from_file_location("local_extension_fixture", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    try:
        torch.manual_seed(0)
        x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
        w = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
        b = torch.randn(2, dtype=torch.float64, requires_grad=True)

        def grads(fn, *extra):
            out = fn(x, w, b, *extra)
            return torch.autograd.grad(out.pow(2).sum(), (x, w), create_graph=True)

        ref = grads(torch.nn.functional.linear)
        (ref2,) = torch.autograd.grad(ref[1].pow(2).sum(), x)
        gx, gw = grads(mod.FusedDense.apply, True)
        torch.testing.assert_close(gw, ref[1].detach())  # the first derivative is right
        assert gw.grad_fn is None  # the extension's weight gradient carries no graph
        gx, gw = grads(mod.FusedDense.apply, False)
        torch.testing.assert_close(torch.autograd.grad(gw.pow(2).sum(), x)[0], ref2)
        gx, gw = grads(mod.FusedDenseAliased.apply)
        torch.testing.assert_close(gw, ref[1].detach())
        assert gw.grad_fn is None  # reached through `_wgrad = _wgrad_ext` at module level
        gx, gw = grads(mod.DenseTorch.apply, True)
        torch.testing.assert_close(torch.autograd.grad(gw.pow(2).sum(), x)[0], ref2)
    finally:
        sys.modules.pop("fused_dense_lib", None)


def test_gradient_computed_only_when_needed_then_read_crashes_with_a_frozen_input():
    path = FIXTURES / "needed_only.py"
    assert [(f.line, f.code) for f in lint(path, config=False)] == [(22, "GS240")]
    spec = importlib.util.spec_from_file_location("needed_only_fixture", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    torch.manual_seed(0)
    x = torch.randn(2, 3, 4, requires_grad=True)
    w = torch.randn(2, 4, 5)  # frozen: needs no gradient
    with pytest.raises(AttributeError, match="'NoneType' object has no attribute 'to'"):
        mod.Bmm.apply(x, w).sum().backward()
    (gx,) = torch.autograd.grad(mod.BmmGuarded.apply(x, w).sum(), x)
    (ref,) = torch.autograd.grad(torch.bmm(x, w).sum(), x)
    torch.testing.assert_close(gx, ref)
    w.requires_grad_()
    (gx, gw) = torch.autograd.grad(mod.Bmm.apply(x, w).sum(), (x, w))  # both trained: runs
    torch.testing.assert_close((gx, gw), torch.autograd.grad(torch.bmm(x, w).sum(), (x, w)))


def test_checkpoint_recomputation_without_the_rng_state_gives_a_wrong_gradient():
    path = FIXTURES / "checkpoint_rng.py"
    assert [(f.line, f.severity) for f in lint(path, config=False) if f.code == "GS241"] == [
        (21, "warning")]
    spec = importlib.util.spec_from_file_location("checkpoint_rng_fixture", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)

    def layer(h):
        return torch.nn.functional.dropout(h, p=0.5, training=True) * 3.0

    torch.manual_seed(0)
    x = torch.randn(64, dtype=torch.float64, requires_grad=True)
    for fn, right in ((mod.Offloaded, False), (mod.OffloadedWithState, True)):
        out = fn.apply(layer, x)
        (grad,) = torch.autograd.grad(out.sum(), x)
        # By hand: out = x * mask * 2 * 3, so d out.sum() / dx is 6 where forward kept x.
        expected = (out != 0).to(x.dtype) * 6.0
        assert torch.equal(grad, expected) == right

    class Owner:
        calls = 0

    import weakref

    owner = Owner()
    y = mod.ReducerHook.apply(weakref.ref(owner), torch.neg, x)
    (grad,) = torch.autograd.grad(y.sum(), x)
    torch.testing.assert_close(grad, -torch.ones_like(x))  # by hand: d/dx of -sum(1 * g)
    assert owner.calls == 2


def test_custom_ops_write_what_mutates_args_declares():
    """A custom op's `mutates_args` says which argument its kernel writes, positional or by
    keyword (`zero_out(y, out=x)`): grad_output and a forward input changed in place."""
    path = FIXTURES / "declared_mutations.py"
    found = {(f.line, f.code, f.severity) for f in lint(path, config=False)
             if f.code in ("GS101", "GS102")}
    assert found == {(28, "GS102", "warning"), (36, "GS101", "error")}
    spec = importlib.util.spec_from_file_location("declared_mutations_fixture", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    x = torch.tensor([1.0, -2.0, 4.0], requires_grad=True)
    given = torch.tensor([1.0, 3.0, -1.0])
    before = given.clone()
    mod.HalveGrad.apply(x).backward(given)
    torch.testing.assert_close(given, before * 0.5)  # the caller's gradient was overwritten
    x = torch.tensor([1.0, -2.0, 4.0])
    before = x.clone()
    y = mod.ZeroInput.apply(x)
    torch.testing.assert_close(y, before * 2)
    torch.testing.assert_close(x, torch.zeros(3))  # the caller's input was overwritten
    x = torch.tensor([1.0, -2.0, 4.0])
    torch.testing.assert_close(mod.ZeroFresh.apply(x), x * 2)
    torch.testing.assert_close(x, torch.tensor([1.0, -2.0, 4.0]))
    torch.testing.assert_close(mod.LossDefault.apply(x), x)  # the option off: x unchanged
    torch.testing.assert_close(x, torch.tensor([1.0, -2.0, 4.0]))


def test_backward_handing_raw_pointers_to_native_code_loses_the_second_derivative(capsys):
    path = FIXTURES / "raw_pointers.py"
    assert [(f.line, f.code) for f in lint(path, config=False)] == [(30, "GS215")]
    spec = importlib.util.spec_from_file_location("raw_pointers_fixture", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    x = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64, requires_grad=True)
    (ref,) = torch.autograd.grad((x * 3.0).pow(2).sum(), x, create_graph=True)
    (g,) = torch.autograd.grad(mod.Scale.apply(x, 3.0).pow(2).sum(), x, create_graph=True)
    torch.testing.assert_close(g, ref.detach())  # by hand: 18 x
    assert g.grad_fn is None  # the native write left no graph
    (g,) = torch.autograd.grad(mod.ScaleLogged.apply(x, 3.0).pow(2).sum(), x,
                               create_graph=True)
    torch.testing.assert_close(torch.autograd.grad(g.pow(2).sum(), x)[0],
                               torch.autograd.grad(ref.pow(2).sum(), x)[0])
    assert "grad" in capsys.readouterr().out


def test_grad_output_written_through_chunk_views_of_a_variable_slice():
    path = FIXTURES / "split_views.py"
    assert [(f.line, f.code) for f in lint(path, config=False)] == [(26, "GS102")]
    spec = importlib.util.spec_from_file_location("split_views_fixture", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    x = torch.randn(2, 6, requires_grad=True)
    ref = torch.tensor([2.0, 2.0, 2.0, 2.0, 1.0, 1.0]).expand(2, 6)  # by hand
    for fn, overwritten in ((mod.ScaleHead, True), (mod.ScaleHeadCopy, False)):
        given = torch.ones(2, 6)
        (grad,) = torch.autograd.grad(fn.apply(x, 4), x, given)
        torch.testing.assert_close(grad, ref)
        assert torch.equal(given, ref) == overwritten  # the caller's gradient changed
