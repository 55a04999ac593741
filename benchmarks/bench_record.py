"""Record the full ``gradsmith bench`` table with its environment in benchmarks/results/.

    python benchmarks/bench_record.py                       # full threads and 1 thread, both modes
    python benchmarks/bench_record.py --threads 1 --mode eager --repeat 5   # a quick look
    python benchmarks/bench_record.py --from-json benchmarks/results/bench.json   # re-render

Every catalog op against its reference, eager and ``torch.compile``d, once at the machine's full
thread count and once at 1 thread, in one process per thread count (a fresh process: compiled
code and thread pools of one setting never leak into the other). Writes bench.json (both
reports), bench.md (environment, load before and after, command, both tables) and bench.png /
bench_t1.png (the charts). Run it with a Python that has torchsort installed to get the soft
sort anchor; without it the soft sort rows say so and show no ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def measure(threads: int, repeat: int, warmup: int, modes: list[str]) -> dict:
    """One report, measured in this process at ``threads`` torch threads."""
    import torch

    from gradsmith.bench import registry
    from gradsmith.bench.runner import report_of, run_case

    torch.set_num_threads(threads)
    load_before = round(os.getloadavg()[0], 2)
    rows = []
    for case in registry().values():
        for mode in modes:
            print(f"[{threads} threads] {case.name} ({mode})", file=sys.stderr, flush=True)
            rows.append(run_case(case, repeat=repeat, warmup=warmup, mode=mode))
    report = report_of(rows, repeat=repeat, warmup=warmup, quick=False)
    report["environment"]["load_average_1min"] = load_before
    report["environment"]["load_average_1min_end"] = round(os.getloadavg()[0], 2)
    return report


def _child(threads: int, ns: argparse.Namespace) -> dict:
    """Measure in a fresh interpreter and return its report."""
    cmd = [sys.executable, __file__, "--child", "--threads", str(threads), "--repeat",
           str(ns.repeat), "--warmup", str(ns.warmup), "--mode", *ns.mode]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out)


def _section(report: dict, title: str) -> list[str]:
    from gradsmith.bench.report import markdown

    env = report["environment"]
    return [
        f"## {title}", "",
        f"- torch threads: {env['torch_threads']} of {env['cpu_count']} logical CPUs "
        f"({env['cpu']}); device {env.get('device', 'cpu')}; soft sort PAV solver: "
        f"{env['pav_backend']}; torchsort: {env.get('torchsort') or 'not installed'}",
        f"- measured {env['date_utc']}; 1-minute load average {env['load_average_1min']} at the "
        f"start, {env.get('load_average_1min_end')} at the end (the machine is shared: other "
        f"processes compete for the cores, so absolute times are noisy; the interleaved "
        f"ratios are what to read)",
        "", markdown(report), ""]


def render(data: dict) -> str:
    first = next(iter(data.values()))
    env = first["environment"]
    lines = [
        "# gradsmith bench: recorded results", "",
        f"- torch {env['torch']}, Python {env['python']}, {env['platform']}, gradsmith "
        f"{env['gradsmith']}",
        f"- forward+backward, median (IQR) of {first['repeat']} interleaved runs after the first "
        f"call and {first['warmup']} warm-up runs; `time x` is the median of the paired "
        "per-round ratios op / reference (its IQR in brackets); saved bytes exact (saved "
        "tensors and tensors on ctx, by storage); peak = highest memory allocated during one "
        "step above the start (torch.profiler on CPU)",
        "- `compiled` rows: both sides through `torch.compile` (default inductor), compiled "
        "during the first call (`compile_s` in bench.json)",
        "- reproduce: `python benchmarks/bench_record.py` (or `gradsmith bench --threads N "
        "--repeat 10`)", "",
        "Below 1 the gradsmith op is faster or keeps less memory.", ""]
    titles = {"full": "Full thread count", "t1": "1 thread"}
    for key, report in data.items():
        lines += _section(report, titles.get(key, key))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="*", default=None,
                        help="thread counts (default: all CPUs, then 1)")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--mode", nargs="+", default=["eager", "compiled"])
    parser.add_argument("--from-json", type=Path)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns.child:
        print(json.dumps(measure(ns.threads[0], ns.repeat, ns.warmup, ns.mode)))
        return
    from gradsmith.bench.plot import plot
    from gradsmith.bench.report import write_results

    if ns.from_json:
        data = json.loads(ns.from_json.read_text())
    else:
        counts = ns.threads or [os.cpu_count() or 1, 1]
        data = {("full" if t == (os.cpu_count() or 1) else f"t{t}"): _child(t, ns)
                for t in counts}
    write_results(data, render(data), RESULTS, "bench")
    for key, report in data.items():
        plot(report, RESULTS / ("bench.png" if key == "full" else f"bench_{key}.png"))


if __name__ == "__main__":
    main()
