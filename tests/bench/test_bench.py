"""gradsmith bench: exact saved bytes, timing statistics, registry coverage, JSON schema, CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import gradsmith.functional as G
from gradsmith import GradsmithError
from gradsmith.bench import Stats, interleaved, registry, run, saved_bytes
from gradsmith.bench.report import markdown, write_results
from gradsmith.cli import main

# --- saved_bytes ------------------------------------------------------------------------------


def test_product_saves_both_factors():
    x = torch.randn(5, 7, requires_grad=True)
    y = torch.randn(5, 7, requires_grad=True)
    assert saved_bytes(torch.mul, (x, y)) == 2 * 5 * 7 * 4


def test_same_tensor_saved_twice_counts_once():
    x = torch.randn(100, dtype=torch.float64, requires_grad=True)
    assert saved_bytes(lambda t: t * t, (x,)) == 100 * 8


def test_exp_saves_only_its_output():
    x = torch.randn(3, 11, requires_grad=True)
    assert saved_bytes(torch.exp, (x,)) == 3 * 11 * 4


class _SavesViewAndBase(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x, x[2:])
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


def test_views_of_one_storage_count_the_storage_once():
    x = torch.randn(64, requires_grad=True)
    assert saved_bytes(_SavesViewAndBase.apply, (x,)) == 64 * 4


def test_excluded_storages_are_not_counted_but_activations_are():
    x = torch.randn(16, 32, requires_grad=True)
    w = torch.randn(8, 32, requires_grad=True)

    def layer(x, w):  # h = x + 0 is an activation; linear saves h and w, relu its output
        return torch.relu(torch.nn.functional.linear(x + 0.0, w))

    everything = saved_bytes(layer, (x, w))
    assert everything == (16 * 32 + 8 * 32 + 16 * 8) * 4
    assert saved_bytes(layer, (x, w), exclude=[x, w]) == (16 * 32 + 16 * 8) * 4
    # a view shares its base's storage, so excluding the base excludes the saved view
    assert saved_bytes(lambda t: t[2:] * t[2:], (x,), exclude=[x]) == 0


def test_nothing_saved_without_grad():
    x, y = torch.randn(8), torch.randn(8)
    assert saved_bytes(torch.mul, (x, y)) == 0


# --- timing -----------------------------------------------------------------------------------


def test_stats_match_numpy_percentiles():
    seconds = [0.004, 0.001, 0.003, 0.010, 0.002, 0.005]
    stats = Stats.of(seconds)
    ms = np.array(seconds) * 1e3
    assert stats.median == pytest.approx(np.median(ms))
    assert stats.q1 == pytest.approx(np.percentile(ms, 25))
    assert stats.q3 == pytest.approx(np.percentile(ms, 75))
    assert (stats.min, stats.max, stats.runs) == (pytest.approx(1.0), pytest.approx(10.0), 6)


def test_candidates_are_interleaved_after_warmup():
    order = []

    def recorder(name):
        return lambda x: order.append(name) or x

    stats = interleaved({"a": (recorder("a"), lambda: (torch.ones(1),)),
                         "b": (recorder("b"), lambda: (torch.ones(1),))}, repeat=3, warmup=1)
    assert order == ["a", "b"] * 4
    assert stats["a"].runs == stats["b"].runs == 3


def test_backward_runs_inside_the_timed_step():
    calls = []

    class Spy(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            calls.append("backward")
            return g

    interleaved({"spy": (Spy.apply, lambda: (torch.ones(2, requires_grad=True),))}, 2, 0)
    assert calls == ["backward", "backward"]


def test_alternate_reverses_the_order_every_other_round():
    order = []
    candidates = {name: (lambda name=name: order.append(name), tuple) for name in "abc"}
    interleaved(candidates, repeat=3, warmup=1, alternate=True)
    assert "".join(order) == "abc" "cba" "abc" "cba"


def test_clock_is_read_around_each_run_only():
    ticks = iter(range(0, 1000, 5))  # each read of the fake clock advances 5 s
    reads = []

    def clock():
        reads.append(None)
        return next(ticks)

    stats = interleaved({"a": (lambda: None, tuple), "b": (lambda: None, tuple)}, repeat=2,
                        warmup=1, clock=clock)
    assert len(reads) == 2 * 2 * 3  # start and stop, 2 candidates, 3 rounds
    assert stats["a"].to_dict("s") == {"median": 5.0, "q1": 5.0, "q3": 5.0, "min": 5.0,
                                       "max": 5.0, "runs": 2}


def test_a_step_that_returns_nothing_is_timed_without_backward():
    x = torch.ones(3, requires_grad=True)

    def step():
        torch.autograd.grad((x * 2).sum(), x)  # its own backward; .grad stays unset

    interleaved({"step": (step, tuple)}, repeat=2, warmup=0)
    assert x.grad is None


def test_stats_in_seconds_and_milliseconds():
    stats = Stats.of([0.001, 0.003, 0.002])
    assert stats.to_dict()["median"] == pytest.approx(2.0)
    assert stats.to_dict("s") == pytest.approx({"median": 0.002, "q1": 0.0015, "q3": 0.0025,
                                                "min": 0.001, "max": 0.003, "runs": 3})
    with pytest.raises(GradsmithError, match=r"unit must be one of \['ms', 's'\], got 'us'"):
        stats.to_dict("us")


# --- registry -----------------------------------------------------------------------------------

_NOT_OPS = {"dann_schedule", "lsq_init_scale", "lsq_surrogate", "pact_surrogate"}


def test_registry_covers_every_catalog_op():
    ops = {n for n in G.__all__ if callable(getattr(G, n))} - _NOT_OPS
    benched = {name.split("-")[0] for name in registry()}
    assert ops <= benched, f"ops without a benchmark: {sorted(ops - benched)}"


def test_registry_has_the_issue_anchors():
    cases = registry()
    assert "scaled_dot_product_attention" in cases["attention"].reference_name
    assert "checkpoint" in cases["checkpoint_sequential"].reference_name
    assert "learnable" in cases["fake_quantize_lsq"].reference_name
    assert {"soft_rank-8x1000", "soft_rank-8x10000", "soft_sort-8x1000",
            "soft_sort-8x10000"} <= set(cases)


@pytest.mark.parametrize("name", ["clipped_relu", "logsumexp", "fake_quantize_lsq",
                                  "fused_add_relu"])
def test_op_and_reference_agree_on_quick_inputs(name):
    case = registry()[name]
    out = case.op(*case.inputs(True))
    ref = case.reference(*case.inputs(True))
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


# --- report / JSON --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def quick_report():
    cases = registry()
    return run([cases["clipped_relu"], cases["fake_quantize_lsq"]], repeat=2, warmup=0,
               quick=True)


def test_report_schema(quick_report):
    r = quick_report
    assert set(r) == {"schema", "environment", "repeat", "warmup", "quick", "results"}
    assert r["schema"] == 2
    assert {"torch", "cpu", "torch_threads", "pav_backend", "device",
            "load_average_1min"} <= set(r["environment"])
    row = r["results"][0]
    assert set(row) == {"op", "mode", "reference", "shape", "time_ms", "time_ratio",
                        "time_ratio_iqr", "compile_s", "saved_bytes", "saved_ratio",
                        "peak_bytes", "peak_ratio", "error", "note"}
    assert row["mode"] == "eager" and row["error"] is None
    for who in ("op", "reference"):
        t = row["time_ms"][who]
        assert t["min"] <= t["q1"] <= t["median"] <= t["q3"] <= t["max"] and t["runs"] == 2
    # the median of the paired per-round ratios lies within the runs' extreme ratios
    q1, q3 = row["time_ratio_iqr"]
    assert q1 <= row["time_ratio"] <= q3
    op, ref = row["time_ms"]["op"], row["time_ms"]["reference"]
    assert op["min"] / ref["max"] <= q1 and q3 <= op["max"] / ref["min"]
    json.dumps(r)  # serialisable


def test_saved_bytes_in_report_are_exact(quick_report):
    clipped = quick_report["results"][0]
    # torch.clamp saves its float32 input; the op a bool mask (1 byte per element).
    assert clipped["saved_bytes"]["reference"] == 4096 * 4
    assert clipped["saved_bytes"]["op"] == 4096
    lsq = quick_report["results"][1]
    # Ours saves x (4096 float32) and the one-element scale; PyTorch's also its zero point.
    assert lsq["saved_bytes"]["op"] == 4096 * 4 + 4
    assert lsq["saved_bytes"]["reference"] == 4096 * 4 + 4 + 4


def test_write_results_records_json_and_markdown_side_by_side(tmp_path):
    data = {"environment": {"torch": "2"}, "rows": [{"median": 1.5, "n": None}]}
    json_path, md_path = write_results(data, "# title\n| a |\n", tmp_path / "new" / "dir",
                                       "bench_x")
    assert (json_path, md_path) == (tmp_path / "new/dir/bench_x.json",
                                    tmp_path / "new/dir/bench_x.md")
    assert json.loads(json_path.read_text(encoding="utf-8")) == data
    assert json_path.read_text(encoding="utf-8").endswith("}\n")
    assert md_path.read_text(encoding="utf-8") == "# title\n| a |\n"


def test_markdown_has_one_row_per_result(quick_report):
    lines = markdown(quick_report).strip().splitlines()
    assert len(lines) == 2 + len(quick_report["results"])
    assert lines[2].startswith("| clipped_relu | eager | torch.clamp |")


# --- CLI ----------------------------------------------------------------------------------------


def test_cli_unknown_op_exits_2_and_lists_known_ops(capsys):
    assert main(["bench", "no_such_op"]) == 2
    err = capsys.readouterr().err
    assert "unknown op 'no_such_op'" in err and "soft_rank-8x1000" in err and "pact" in err
    assert "file.py::Fn" in err


def test_cli_bad_repeat_exits_2(capsys):
    assert main(["bench", "pact", "--repeat", "0"]) == 2
    assert "--repeat must be >= 1" in capsys.readouterr().err


def test_cli_list_exits_0(capsys):
    assert main(["bench", "--list"]) == 0
    assert "fake_quantize_lsq" in capsys.readouterr().out


def test_cli_quick_run_writes_json_and_markdown(tmp_path, capsys):
    out, md = tmp_path / "b.json", tmp_path / "b.md"
    code = main(["bench", "clipped_relu", "pact", "--quick", "--repeat", "2", "--warmup", "0",
                 "--mode", "eager", "--json", str(out), "--markdown", str(md)])
    assert code == 0
    data = json.loads(out.read_text())
    assert [r["op"] for r in data["results"]] == ["clipped_relu", "pact"] and data["quick"]
    assert "| pact | eager |" in md.read_text()
    env = data["environment"]  # the file says where it was measured
    first = md.read_text().splitlines()[0]
    assert f"torch {env['torch']}" in first and env["date_utc"] in first
    assert f"{env['torch_threads']} threads" in first
    assert "clipped_relu" in capsys.readouterr().out


def test_cli_plot_without_matplotlib_exits_2(tmp_path, capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "matplotlib" else real(name, *a))
    assert main(["bench", "pact", "--quick", "--plot", str(tmp_path / "p.png")]) == 2
    assert "pip install 'gradsmith[html]'" in capsys.readouterr().err


def test_cli_plot_writes_png(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "p.png"
    assert main(["bench", "pact", "--quick", "--repeat", "1", "--warmup", "0", "--mode",
                 "eager", "--plot", str(path)]) == 0
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_bad_threads_exits_2(capsys):
    assert main(["bench", "pact", "--threads", "0"]) == 2
    assert "--threads must be between 1 and" in capsys.readouterr().err


# --- honest comparisons -------------------------------------------------------------------------


def test_soft_sort_without_torchsort_has_no_reference_not_a_self_comparison(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "torchsort" else real(name, *a))
    case = registry()["soft_rank-8x1000"]
    assert case.reference is None and "not installed" in case.reference_name
    row = run([case], repeat=2, warmup=0, quick=True)["results"][0]
    assert row["time_ms"]["reference"] is None and row["time_ratio"] is None
    assert row["saved_ratio"] is None and "torchsort is not installed" in row["note"]
    lines = markdown({"results": [row]}).splitlines()
    assert "| - |" in lines[2] and "soft_rank-8x1000 [1]" in lines[2]
    assert lines[-1].startswith("- [1] ") and "torchsort is not installed" in lines[-1]


def test_plot_draws_every_row_on_a_log_axis(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from gradsmith.bench.plot import plot

    def row(op, ratio, ref=True, error=None):
        stats = {"median": 1.0, "q1": 1.0, "q3": 1.0, "min": 1.0, "max": 1.0, "runs": 2}
        return {"op": op, "mode": "eager", "reference": "r", "shape": "4",
                "time_ms": {"op": stats, "reference": stats if ref else None},
                "time_ratio": ratio, "time_ratio_iqr": [ratio * 0.9, ratio * 1.1] if ratio
                else None, "saved_ratio": ratio, "peak_ratio": None, "error": error}

    report = {"repeat": 2, "environment": {}, "results": [
        row("fast", 0.5), row("huge", 69.0), row("alone", None, ref=False),
        row("broken", None, error="boom")]}
    drawn = {}
    real_savefig = plt.Figure.savefig

    def spy(fig, path, **kw):
        drawn["axes"] = fig.axes
        return real_savefig(fig, path, **kw)

    monkeypatch.setattr(plt.Figure, "savefig", spy)
    path = tmp_path / "p.png"
    plot(report, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    time_ax = drawn["axes"][0]
    assert time_ax.get_xscale() == "log"
    texts = [t.get_text() for t in time_ax.texts]
    assert "0.5x" in texts and "69x" in texts  # values written on the bars
    assert any("no reference" in t for t in texts) and any("error" in t for t in texts)
    assert len(time_ax.patches) == 2  # only the two real comparisons are drawn as bars


def test_a_note_many_rows_share_is_printed_once_and_rows_carry_its_number():
    from gradsmith.bench.report import notes, rows

    def row(op, note=None, error=None):
        return {"op": op, "mode": "eager", "reference": "-", "shape": "-", "note": note,
                "error": error, "time_ms": {"op": None, "reference": None}, "time_ratio": None,
                "saved_bytes": {"op": None, "reference": None}, "saved_ratio": None}

    synth = "inputs synthesised from the signature"
    report = {"results": [row("f.py::A", synth), row("f.py::B", f"{synth}; no reference: x"),
                          row("f.py::C"), row("f.py::D", error="import failed: y")]}
    assert notes(report) == [f"[1] {synth}", "[2] no reference: x",
                             "[3] error: import failed: y"]
    assert [r[0] for r in rows(report)] == ["f.py::A [1]", "f.py::B [1,2]", "f.py::C",
                                            "f.py::D [3]"]
