"""Record the full ``gradsmith bench`` table with its environment in benchmarks/results/.

    python benchmarks/bench_record.py [--threads 1] [--repeat 15]      # measure now
    python benchmarks/bench_record.py --from-json report.json           # render a saved run

Writes benchmarks/results/bench.json (the full report) and bench.md (environment, command,
table). Run it with a Python that has torchsort installed to get the soft sort anchor.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from gradsmith.bench import registry, run
from gradsmith.bench.report import markdown, write_results

RESULTS = Path(__file__).resolve().parent / "results"


def render(report: dict, load: str = "") -> str:
    env = report["environment"]
    lines = [
        "# gradsmith bench: recorded results",
        "",
        f"- torch {env['torch']}, Python {env['python']}, {env['platform']}",
        f"- CPU: {env['cpu']} ({env['cpu_count']} logical CPUs), torch threads: "
        f"{env['torch_threads']}; soft sort PAV solver: {env['pav_backend']}",
        f"- forward+backward, median (IQR) of {report['repeat']} interleaved runs after "
        f"{report['warmup']} warm-up runs; saved bytes exact (saved_tensors_hooks, by storage)",
    ]
    if env.get("date_utc"):
        lines.append(f"- measured {env['date_utc']}, 1-minute load average at the start "
                     f"{env.get('load_average_1min')}")
    if env.get("torchsort"):
        lines.append(f"- soft sort anchor: torchsort {env['torchsort']}, built in a separate venv "
                     "for this recording (not a dependency; it builds only with nvcc hidden from "
                     "PATH and `--no-build-isolation`)")
    if load:
        lines.append(f"- machine load while measuring: {load}")
    lines += ["- reproduce: `gradsmith bench --threads 1 --repeat 15 --warmup 3` "
              "(`python benchmarks/bench_record.py`)", "",
              "`time x` and `saved x` are gradsmith / reference: below 1 the gradsmith op is "
              "faster or keeps less memory.", "", markdown(report)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--from-json", type=Path)
    parser.add_argument("--load", default="", help="free text about machine load to record")
    args = parser.parse_args()
    if args.from_json:
        report = json.loads(args.from_json.read_text())
    else:
        torch.set_num_threads(args.threads)
        report = run(registry().values(), repeat=args.repeat, warmup=3)
    write_results(report, render(report, args.load), RESULTS, "bench")


if __name__ == "__main__":
    main()
