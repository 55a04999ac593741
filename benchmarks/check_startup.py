"""Start-up of ``gradsmith check``: how long a user waits for one Function, before and after.

Each run is ``python -m gradsmith check TARGET`` in a fresh process on a pseudo-terminal (as a
user at a terminal sees it), timed from the start to:

- the first byte on screen (issue 9 asks for something within 1 s),
- the first eager verdict line (the core verdict, printed before the deployment checks end;
  gradsmith versions without it have none),
- the end of the process (the whole result; issue 9 asks for <= 3 s on a quiet 2-core machine).

Targets (written to a temporary folder): ``one.py::Swish`` (one Function with a registered
example) and the misspelt ``one.py::Swsh`` (issue 9: a typo must be reported before any worker
starts). Configurations: this checkout with the deployment checks (the default) and without
(``--no-compat``), and, with ``--before SRC``, another gradsmith source tree (e.g. the commit
before the worker server, extracted with ``git archive``), all interleaved round-robin so load
changes hit them alike; one warm-up round is discarded. Reports median, min and max.

Usage:
    python benchmarks/check_startup.py [--before /path/to/old/src] [--repeats 5]

The recorded result was made so, on a quiet machine (the before tree is the commit that moved
the worker into gradsmith.isolation, which reused one worker for every Function):

    mkdir -p /tmp/before && git archive bcbb93d src | tar -x -C /tmp/before
    OMP_NUM_THREADS=1 nice -n 19 python benchmarks/check_startup.py --before /tmp/before/src \
        --before-label "before (bcbb93d, a reused worker)" --repeats 5
"""

from __future__ import annotations

import argparse
import os
import pty
import re
import select
import statistics
import sys
import tempfile
import time
from pathlib import Path

from gradsmith.bench import environment
from gradsmith.bench.report import write_results

ONE = '''
import torch
import gradsmith


@gradsmith.example(lambda: (torch.randn(8, 5, dtype=torch.float64, requires_grad=True),
                            torch.tensor(1.5, dtype=torch.float64, requires_grad=True)))
class Swish(torch.autograd.Function):
    """x * sigmoid(beta * x), learnable beta: a typical user Function."""

    @staticmethod
    def forward(x, beta):
        return x * torch.sigmoid(beta * x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, grad):
        x, beta = ctx.saved_tensors
        s = torch.sigmoid(beta * x)
        ds = s * (1 - s)
        return grad * (s + x * beta * ds), (grad * x * x * ds).sum()
'''
_ANSI = re.compile(rb"\x1b\[[0-9;?]*[a-zA-Z]")


def timed_run(argv: list[str], cwd: Path, env: dict[str, str], limit: float = 600) -> dict:
    """Run ``argv`` on a pseudo-terminal; seconds to first output, eager line, exit."""
    started = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:  # the child: becomes the command
        os.chdir(cwd)
        os.execve(argv[0], argv, env)
    first = eager = None
    text = b""
    try:
        while time.perf_counter() - started < limit:
            ready, _, _ = select.select([fd], [], [], 1.0)
            if not ready:
                continue
            try:
                data = os.read(fd, 65536)
            except OSError:  # the child closed the terminal: it has exited
                break
            if not data:
                break
            now = time.perf_counter() - started
            first = now if first is None else first
            text += data
            if eager is None and b"eager checks" in _ANSI.sub(b"", text):
                eager = now
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    end = time.perf_counter() - started
    return {"first_output_s": first, "eager_verdict_s": eager, "exit_s": end,
            "exit_code": os.waitstatus_to_exitcode(status),
            "tail": _ANSI.sub(b"", text).decode("utf-8", "replace")[-300:]}


def _summary(values: list[float | None]) -> dict | None:
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3), "runs": [round(v, 3) for v in values]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", metavar="SRC",
                        help="a gradsmith source tree (the folder holding the gradsmith package) "
                             "to measure as 'before'")
    parser.add_argument("--before-label", default="before",
                        help="its name in the results (e.g. the commit)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = parser.parse_args()

    here = str(Path(__file__).resolve().parents[1] / "src")
    configs = {"after (default, with deployment checks)": (here, []),
               "after --no-compat": (here, ["--no-compat"])}
    if args.before:
        configs[args.before_label] = (str(Path(args.before).resolve()), [])
    cases = {"one Function": "one.py::Swish", "misspelt ::Name": "one.py::Swsh"}
    env_info = environment()
    env_info["nice"] = os.nice(0)
    env_info["OMP_NUM_THREADS"] = os.environ.get("OMP_NUM_THREADS")
    results: dict = {c: {k: [] for k in configs} for c in cases}
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "one.py").write_text(ONE)
        for round_index in range(args.repeats + 1):
            for case, target in cases.items():
                for name, (src, extra) in configs.items():
                    env = dict(os.environ, PYTHONPATH=src, COLUMNS="100")
                    run = timed_run([sys.executable, "-m", "gradsmith", "check", target,
                                     *extra], Path(tmp), env)
                    if round_index:  # round 0 warms the OS file cache
                        results[case][name].append(run)
    env_info["load_average_1min_at_end"] = round(os.getloadavg()[0], 2)
    table = {case: {name: {metric: _summary([r[metric] for r in runs])
                           for metric in ("first_output_s", "eager_verdict_s", "exit_s")}
                    | {"exit_codes": sorted({r["exit_code"] for r in runs})}
                    for name, runs in by_config.items()}
             for case, by_config in results.items()}
    doc = {"repeats": args.repeats, "environment": env_info, "configs": {
        name: {"src": src, "extra_args": extra} for name, (src, extra) in configs.items()},
        "results": table}
    lines = ["# gradsmith check start-up: one Function, and a misspelt ::Name", "",
             f"Environment: Python {env_info['python']}, torch {env_info['torch']}, "
             f"{env_info['cpu']}, {env_info['cpu_count']} CPUs, {env_info['platform']}, "
             f"recorded {env_info['date_utc']}; 1-minute load average "
             f"{env_info['load_average_1min']} at start, "
             f"{env_info['load_average_1min_at_end']} at end; nice {env_info['nice']}, "
             f"OMP_NUM_THREADS={env_info['OMP_NUM_THREADS']}. Median (min-max) of "
             f"{args.repeats} interleaved runs on a pseudo-terminal, seconds from the start "
             "of the process.", "",
             "| case | configuration | first output | eager verdict | whole result | exit |",
             "|---|---|---|---|---|---|"]
    for case, by_config in table.items():
        for name, metrics in by_config.items():
            cells = []
            for metric in ("first_output_s", "eager_verdict_s", "exit_s"):
                m = metrics[metric]
                cells.append("-" if m is None else
                             f"{m['median']:.2f} ({m['min']:.2f}-{m['max']:.2f})")
            lines.append(f"| {case} | {name} | {' | '.join(cells)} | "
                         f"{','.join(map(str, metrics['exit_codes']))} |")
    write_results(doc, "\n".join(lines) + "\n", args.out, "check_startup")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
