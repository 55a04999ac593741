"""gradsmith bench on the user's own Functions: reference choice, exact bytes, CLI, isolation."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from gradsmith.bench import autograd_of_forward, case_for, run_case
from gradsmith.cli import main

HERE = Path(__file__).resolve().parent
FILE = HERE / "user_functions.py"


def _module():
    spec = importlib.util.spec_from_file_location("bench_user_functions", FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


U = _module()


def _case(name, example_index=0, make_args=None):
    return case_for(getattr(U, name), f"user_functions.py::{name}", example_index, make_args)


def test_classic_forward_runs_as_ordinary_ops_under_autograd():
    x = torch.randn(5, requires_grad=True)
    y = autograd_of_forward(U.MaskReLU)(x)
    assert y.grad_fn is not None and "Clamp" in type(y.grad_fn).__name__
    (g,) = torch.autograd.grad(y.sum(), x)
    torch.testing.assert_close(g, (x > 0).float())


def test_modern_forward_runs_as_ordinary_ops_under_autograd():
    x, y = torch.randn(5, requires_grad=True), torch.randn(5, requires_grad=True)
    out = autograd_of_forward(U.FusedAddReLU)(x, y)
    torch.testing.assert_close(out, torch.relu(x + y))
    assert "Relu" in type(out.grad_fn).__name__


@pytest.mark.parametrize(("name", "expected"), [
    ("MaskReLU", "autograd of its forward"),
    ("StashSigmoid", "autograd of its forward"),
    ("FusedAddReLURegistered", "reference=relu_of_sum"),
    ("SignSTE", "surrogate=clip_surrogate"),
    ("SignSTENoSurrogate", "autograd of its forward"),
    ("NumpyTanh", "none"),
])
def test_reference_is_registered_then_autograd_then_surrogate(name, expected):
    case = _case(name)
    assert case.reference_name == expected
    assert (case.reference is None) == (expected == "none")


def test_notes_say_why_a_reference_differs_or_is_missing():
    assert "another gradient" in _case("SignSTENoSurrogate").note
    note = _case("NumpyTanh").note
    assert "reference=fn" in note
    # and why the autograd of the forward cannot be the reference: the error it raised
    assert "not differentiable as ordinary code (its output does not require grad" in note
    assert _case("MaskReLU").note is None


def test_a_lambda_reference_is_named_by_file_and_line():
    @__import__("gradsmith").example(lambda: (torch.randn(4),), reference=lambda x: x.clamp(min=0))
    class Lam(U.MaskReLU):
        pass

    line = Lam.__gradsmith_examples__[0].reference.__code__.co_firstlineno
    name = case_for(Lam, "Lam", 0).reference_name
    assert name == f"reference=<lambda> at test_user_bench.py:{line}"


def test_synthesised_inputs_are_flagged():
    case = _case("FusedAddReLU", None, lambda: (torch.randn(3, 4), torch.randn(3, 4)))
    assert case.reference_name == "autograd of its forward" and "synthesised" in case.note


def test_synthesised_inputs_grow_along_the_batch_to_realistic_sizes():
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    case = _case("FusedAddReLU", None, lambda: (x, y))
    grown = case.inputs(False)
    # 3 x 4 repeated 4x at a time while the largest input stays within 2^20 elements
    assert [tuple(t.shape) for t in grown] == [(3 * 4 ** 8, 4)] * 2
    assert "repeated 65536x along their first dimension" in case.note
    # rows are the synthesised rows, repeated (values kept)
    torch.testing.assert_close(grown[0].detach()[3:6], x, rtol=0, atol=0)
    row = run_case(case, repeat=2, warmup=0)
    # saved bytes of the grown inputs: the bool mask against relu's float32 output
    n = 3 * 4 ** 8 * 4
    assert row["saved_bytes"] == {"op": n, "reference": 4 * n}


def test_growth_stops_where_the_function_rejects_a_larger_batch():
    from gradsmith.bench.sizes import grow_batch

    def three_rows(x):
        if x.shape[0] > 48:
            raise ValueError("at most 48 rows")
        return x * 2

    grown, factor = grow_batch(three_rows, (torch.randn(3, 5, requires_grad=True),))
    assert factor == 16 and grown[0].shape == (48, 5) and grown[0].requires_grad


def test_growth_repeats_only_the_tensors_that_share_the_batch():
    from gradsmith.bench.sizes import grow_batch

    x, w, b = torch.randn(3, 4), torch.randn(5, 4), torch.randn(5)
    (gx, gw, gb, k), factor = grow_batch(
        lambda x, w, b, k: torch.nn.functional.linear(x, w, b) * k,
        (x.requires_grad_(), w.requires_grad_(), b.requires_grad_(), 2.0), target=3072)
    assert factor == 256 and gx.shape == (768, 4)
    assert gw is w and gb is b and k == 2.0  # weight and bias are not the batch
    assert gx.grad is None  # the probe's gradients are not left on the inputs
    no_batch, one = grow_batch(lambda s: s * 2, (torch.tensor(1.5, requires_grad=True),))
    assert one == 1 and no_batch[0].shape == ()


def test_mask_relu_keeps_a_quarter_of_autograds_bytes():
    row = run_case(_case("MaskReLU"), repeat=2, warmup=0)
    # a bool mask (1 byte per element) vs clamp's saved float32 input (4 bytes per element)
    assert row["saved_bytes"] == {"op": U.N, "reference": 4 * U.N}
    assert row["saved_ratio"] == pytest.approx(0.25)
    assert row["time_ratio"] > 0 and row["peak_bytes"]["op"] > 0 and row["error"] is None


def test_stashing_on_ctx_is_not_a_win():
    row = run_case(_case("StashSigmoid"), repeat=2, warmup=0)
    # y stashed on ctx (4 bytes per element) vs sigmoid's saved output (the same)
    assert row["saved_bytes"] == {"op": 4 * U.N, "reference": 4 * U.N}


def test_a_row_without_reference_has_no_ratio():
    row = run_case(_case("NumpyTanh"), repeat=2, warmup=0)
    assert row["time_ms"]["op"] is not None and row["time_ms"]["reference"] is None
    assert row["time_ratio"] is row["saved_ratio"] is row["peak_ratio"] is None


def test_a_failing_forward_is_a_row_with_the_error():
    row = run_case(_case("Broken"), repeat=2, warmup=0)
    assert "boom in forward" in row["error"] and row["time_ms"]["op"] is None


def test_compiled_mode_measures_both_sides_compiled():
    row = run_case(_case("MaskReLU"), repeat=2, warmup=0, mode="compiled", peak=False)
    assert row["mode"] == "compiled" and row["error"] is None, row
    assert row["compile_s"]["op"] > 0 and row["compile_s"]["reference"] > 0
    assert row["saved_bytes"]["op"] is not None and row["time_ratio"] is not None


def test_cli_benches_a_file_in_an_isolated_worker(tmp_path, capsys):
    out = tmp_path / "user.json"
    code = main(["bench", f"{FILE}::MaskReLU", str(FILE) + "::Broken", "--mode", "eager",
                 "--repeat", "2", "--warmup", "0", "--json", str(out)])
    assert code == 1  # Broken could not be measured
    rows = {r["op"].split("::")[1]: r for r in json.loads(out.read_text())["results"]}
    assert rows["MaskReLU"]["saved_bytes"] == {"op": U.N, "reference": 4 * U.N}
    assert "boom in forward" in rows["Broken"]["error"]
    text = capsys.readouterr().out
    assert "autograd of its forward" in text and "boom in forward" in text


def test_cli_benches_every_function_of_a_file_in_process(tmp_path):
    out = tmp_path / "all.json"
    code = main(["bench", str(FILE), "--no-isolate", "--mode", "eager", "--repeat", "1",
                 "--warmup", "0", "--json", str(out)])
    names = [r["op"].split("::")[1] for r in json.loads(out.read_text())["results"]]
    assert code == 1 and set(names) >= {"MaskReLU", "StashSigmoid", "FusedAddReLU", "SignSTE",
                                        "NumpyTanh", "Broken", "FusedAddReLURegistered"}


def test_cli_unknown_function_is_a_usage_error(capsys):
    assert main(["bench", f"{FILE}::NoSuchFn", "--mode", "eager"]) == 2
    assert "NoSuchFn" in capsys.readouterr().err


def test_cli_missing_file_is_a_usage_error(capsys):
    assert main(["bench", "no/such/file.py", "--mode", "eager"]) == 2
    assert "gradsmith bench" in capsys.readouterr().err


def test_cli_cuda_without_a_gpu_is_a_usage_error(capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["bench", "pact", "--device", "cuda", "--quick"]) == 2
    assert "no CUDA GPU is available" in capsys.readouterr().err


def test_a_forward_that_fails_under_autograd_is_named_in_the_note():
    class InPlaceOnInput(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.mul_(2)  # in place on a leaf: autograd of this forward cannot run

        @staticmethod
        def backward(ctx, g):
            return g * 2

    case = case_for(InPlaceOnInput, "InPlaceOnInput", None, lambda: (torch.randn(3, 4),))
    assert case.reference is None
    assert "not differentiable as ordinary code (RuntimeError: a leaf Variable that requires " \
           "grad" in case.note


def test_a_rows_notes_stay_separate_parts_through_the_run():
    from gradsmith.bench.report import notes

    case = _case("SignSTENoSurrogate", None, lambda: (torch.randn(3, 4),))
    row = run_case(case, repeat=1, warmup=0)
    printed = notes({"results": [row]})
    assert len(printed) == 2, printed
    assert printed[0].startswith("[1] inputs synthesised") and "another gradient" in printed[1]


def test_growth_keeps_the_last_fast_size_when_the_cost_outgrows_the_batch(monkeypatch):
    from gradsmith.bench import sizes

    # the first probe (12 rows) takes 0.01 s, the second (48 rows) 1 s: keep 12 rows
    times = iter([0.0, 0.01, 1.0, 2.0])
    monkeypatch.setattr(sizes.time, "perf_counter", lambda: next(times))
    grown, factor = sizes.grow_batch(torch.tanh, (torch.randn(3, 4, requires_grad=True),))
    assert factor == 4 and grown[0].shape == (12, 4)
