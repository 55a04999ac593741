"""Target resolution, candidate listing and input synthesis (no subprocesses)."""

from __future__ import annotations

import pytest
import torch

from gradsmith._errors import GradsmithUsageError
from gradsmith.discovery import (
    NoInputs,
    Source,
    Synthesized,
    TargetImportError,
    list_candidates,
    resolve_ref,
    resolve_targets,
    synthesize,
)


def _names(source: Source) -> list[str]:
    return [c.ref.attr for c in list_candidates(source).candidates]


def test_file_lists_functions_defined_there_but_not_imported_ones(write, snippets):
    path = write("ops.py", "from torch.autograd.function import InplaceFunction\n",
                 snippets.good, snippets.bad)
    (source,) = resolve_targets([str(path)])
    assert source.kind == "file" and source.names is None
    assert _names(source) == ["Cube", "BadMatmul"]


def test_relative_label_and_name_selection(write, snippets, tmp_path):
    write("ops.py", snippets.good, snippets.bad)
    (source,) = resolve_targets(["ops.py::BadMatmul"], cwd=tmp_path)
    (candidate,) = list_candidates(source).candidates
    assert candidate.ref.label == "ops.py::BadMatmul"
    assert candidate.examples == ("example0",)
    assert resolve_ref(candidate.ref).__name__ == "BadMatmul"


def test_directory_is_walked_recursively_and_sorted(write, snippets, tmp_path):
    write("b.py", snippets.good)
    write("sub/a.py", snippets.bad)
    write(".hidden/c.py", snippets.good)
    labels = [s.label for s in resolve_targets([str(tmp_path)], cwd=tmp_path)]
    assert labels == ["b.py", "sub/a.py"]


def test_registered_plain_function_is_a_candidate_unregistered_is_not(write):
    path = write("funcs.py", """
@gradsmith.example(lambda: (torch.ones(2, dtype=torch.float64, requires_grad=True),))
def registered(x):
    return x * 2

def helper(x):
    return x
""")
    (source,) = resolve_targets([str(path)])
    assert _names(source) == ["registered"]


def test_dotted_package_lists_submodules_and_registered_only_filters():
    (source,) = resolve_targets(["gradsmith.examples"])
    names = _names(source)
    assert {"Linear", "Sum", "SignSTE", "ClippedReLU"} <= set(names)
    assert len(names) == len(set(names))
    empty = Source("module", "gradsmith.discovery", "d", registered_only=True)
    assert _names(empty) == []


def test_file_inside_a_package_is_imported_with_its_package(write, snippets, tmp_path):
    write("pkg/__init__.py", "", header=False)
    write("pkg/helpers.py", "SCALE = 3\n", header=False)
    write("pkg/ops.py", "from .helpers import SCALE\n", snippets.good)
    (source,) = resolve_targets([str(tmp_path / "pkg" / "ops.py")])
    (candidate,) = list_candidates(source).candidates
    assert resolve_ref(candidate.ref).__module__ == "pkg.ops"


@pytest.mark.parametrize("target, match", [
    ("missing.py", r"no such file or directory.*fix the path"),
    ("not_a_module_anywhere", r"no file, directory or module named 'not_a_module_anywhere'"),
    ("data.txt", r"is not a Python file"),
    ("ops.py::", r"invalid name after '::'"),
    ("ops.py::1abc", r"invalid name after '::'"),
    (".::Cube", r"'::Name' needs a file"),
])
def test_bad_targets_are_usage_errors(target, match, write, snippets, tmp_path):
    write("ops.py", snippets.good)
    (tmp_path / "data.txt").write_text("hello")
    with pytest.raises(GradsmithUsageError, match=match):
        resolve_targets([target], cwd=tmp_path)


def test_syntax_error_in_named_file_is_usage_error_with_line(write):
    path = write("broken.py", "def f(:\n    pass\n", header=False)
    with pytest.raises(GradsmithUsageError, match=r"syntax error at line 1.*fix the file"):
        resolve_targets([str(path)])


def test_syntax_error_in_walked_directory_becomes_import_problem(write, snippets, tmp_path):
    write("ok.py", snippets.good)
    write("broken.py", "def f(:\n", header=False)
    broken, ok = resolve_targets([str(tmp_path)], cwd=tmp_path)
    assert broken.problem and "syntax error at line 1" in broken.problem
    assert ok.problem is None
    with pytest.raises(TargetImportError, match="syntax error"):
        list_candidates(broken)


def test_unknown_name_lists_the_candidates_before_importing(write, snippets):
    path = write("ops.py", snippets.good, snippets.bad, "raise SystemExit('imported')\n")
    with pytest.raises(GradsmithUsageError, match=r"no object named 'Cubes'; did you mean "
                                                  r"'Cube'\? candidates there: Cube, BadMatmul"):
        resolve_targets([f"{path}::Cubes"])


def test_unknown_name_in_a_module_that_binds_names_at_run_time_is_found_on_import(write,
                                                                                   snippets):
    # globals() can bind any name: only importing the module can tell, so the listing does.
    path = write("ops.py", snippets.good, "globals()['Made'] = Cube\n")
    (made,) = resolve_targets([f"{path}::Made"])
    assert [c.ref.attr for c in list_candidates(made).candidates] == ["Made"]
    (source,) = resolve_targets([f"{path}::Swish"])
    with pytest.raises(GradsmithUsageError, match=r"no object named 'Swish'.*Cube"):
        list_candidates(source)


def test_name_of_a_non_callable_is_usage_error(write):
    path = write("consts.py", "VALUE = 3\n")
    (source,) = resolve_targets([f"{path}::VALUE"])
    with pytest.raises(GradsmithUsageError, match=r"is a int, expected a torch.autograd"):
        list_candidates(source)


def test_import_error_is_reported_with_location(write, snippets):
    path = write("bad_import.py", snippets.raises_at_import, header=False)
    (source,) = resolve_targets([str(path)])
    with pytest.raises(TargetImportError, match=r"RuntimeError: broken at import time at .*bad_import.py:2"):
        list_candidates(source)


class _LinearFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        return input.mm(weight.t()) + (0 if bias is None else bias)

    @staticmethod
    def backward(ctx, grad):
        return None, None, None


class _ModernReduce(torch.autograd.Function):
    @staticmethod
    def forward(x, dim, keepdim=False):
        return x.sum(dim, keepdim=keepdim)

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, grad):
        return None, None, None


def test_synthesis_finds_linear_shapes_and_keeps_defaults():
    found = synthesize(_LinearFn)
    assert isinstance(found, Synthesized)
    x, w, bias = found.args
    assert x.shape[1] == w.shape[1] and bias is None
    assert x.dtype == torch.float64 and x.requires_grad
    assert "bias=None" in found.description


def test_synthesis_uses_ints_for_dim_in_modern_style():
    found = synthesize(_ModernReduce)
    assert isinstance(found, Synthesized)
    assert found.args[1] == -1 and found.args[2] is False
    assert found.description.startswith("x: float64")


def test_synthesis_is_seeded():
    first, second = synthesize(_LinearFn), synthesize(_LinearFn)
    assert torch.equal(first.args[0], second.args[0])


def test_no_usable_inputs_gives_the_fix():
    class NeedsMode(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, mode):
            raise ValueError("mode must be 'fast'")

    found = synthesize(NeedsMode)
    assert isinstance(found, NoInputs)
    assert "ValueError: mode must be 'fast'" in found.reason
    assert "@gradsmith.example(lambda: (torch.randn(" in found.reason
    assert "class NeedsMode" in found.reason


def test_synthesis_retries_with_positive_values_when_output_is_not_finite():
    found = synthesize(lambda x: x.log())
    assert isinstance(found, Synthesized)
    assert bool((found.args[0] >= 0.5).all()) and "in [0.5, 1.5)" in found.description


def test_synthesis_hands_out_fresh_inputs_after_a_mutating_probe():
    def mutates(x):
        x.data.add_(100.0)
        return x * 2

    mutated = synthesize(mutates).args[0]
    pristine = synthesize(lambda x: x * 2).args[0]
    assert torch.equal(mutated, pristine)


def test_walks_skip_files_that_act_when_imported(write, snippets, tmp_path, monkeypatch):
    for name in ("setup.py", "conftest.py", "__main__.py"):
        write(name, "raise SystemExit('must not be imported')\n", header=False)
    write("ops.py", snippets.good)
    assert [s.label for s in resolve_targets([str(tmp_path)], cwd=tmp_path)] == ["ops.py"]

    write("walkpkg/__init__.py", "", header=False)
    write("walkpkg/__main__.py", "raise SystemExit('must not be imported')\n", header=False)
    write("walkpkg/ops.py", snippets.good)
    monkeypatch.syspath_prepend(str(tmp_path))
    listing = list_candidates(Source("module", "walkpkg", "walkpkg"))
    assert listing.errors == []
    assert [c.ref.label for c in listing.candidates] == ["walkpkg.ops::Cube"]


def test_synthesis_covers_conv2d_and_string_hyperparameters():
    import torch.nn.functional as F

    conv = synthesize(lambda input, weight, bias, stride, padding:
                      F.conv2d(input, weight, bias, stride, padding))
    assert [tuple(a.shape) for a in conv.args[:3]] == [(2, 3, 6, 6), (4, 3, 3, 3), (4,)]
    loss = synthesize(lambda input, target, reduction: F.mse_loss(input, target,
                                                                 reduction=reduction))
    assert loss.args[2] == "mean"


def test_dotted_modules_are_found_from_the_working_directory_like_python_m(write, snippets,
                                                                           tmp_path):
    write("myops.py", snippets.good)
    write("pkg/__init__.py", "raise SystemExit('the package must not be imported here')\n")
    write("pkg/ops.py", snippets.good)
    sources = resolve_targets(["myops", "pkg.ops::Cube"], cwd=tmp_path)
    assert [(s.kind, s.location, s.names) for s in sources] == [
        ("module", "myops", None), ("module", "pkg.ops", ("Cube",))]
    with pytest.raises(GradsmithUsageError, match=r"no file, directory or module named "
                                                  r"'pkg.opz'"):
        resolve_targets(["pkg.opz"], cwd=tmp_path)
