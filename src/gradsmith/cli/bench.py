"""``gradsmith bench [OPS...] [--json FILE] [--plot FILE.png] [--markdown FILE] [--repeat N] [--threads N] [--quick]``.

Exit codes: 0 measured, 2 usage error (unknown op name, bad --repeat, matplotlib missing for
--plot). The library does the work (:mod:`gradsmith.bench`); this module parses and prints.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gradsmith._errors import GradsmithUsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``gradsmith bench``."""
    parser.add_argument("ops", nargs="*", metavar="OP",
                        help="ops to measure (default: all; --list shows the names)")
    parser.add_argument("--json", metavar="FILE", help="also write the full report as JSON")
    parser.add_argument("--markdown", metavar="FILE", help="also write the table as markdown")
    parser.add_argument("--plot", metavar="FILE.png",
                        help="bar chart of the ratios (needs matplotlib: gradsmith[html])")
    parser.add_argument("--repeat", type=int, default=10, metavar="N",
                        help="timed interleaved runs per op and reference (default 10)")
    parser.add_argument("--warmup", type=int, default=2, metavar="N",
                        help="untimed runs first (default 2)")
    parser.add_argument("--threads", type=int, default=None, metavar="N",
                        help="torch.set_num_threads(N) first (default: torch's default)")
    parser.add_argument("--quick", action="store_true",
                        help="small inputs: the whole registry in seconds (CI smoke test)")
    parser.add_argument("--list", action="store_true", help="list the op names and exit")


def _select(names: list[str]):
    from gradsmith.bench import registry

    cases = registry()
    unknown = [n for n in names if n not in cases]
    if unknown:
        raise GradsmithUsageError(
            f"gradsmith bench: unknown op {', '.join(map(repr, unknown))}; known ops: "
            f"{', '.join(cases)}"
        )
    return [cases[n] for n in names] if names else list(cases.values())


def run(args: argparse.Namespace) -> int:
    """Run the benchmark; return the exit code."""
    from rich.console import Console

    console = Console()
    if not console.is_terminal:  # piped or redirected: do not wrap the table at 80 columns
        console = Console(width=200)
    err = Console(stderr=True)
    try:
        if args.repeat < 1 or args.warmup < 0:
            raise GradsmithUsageError(
                f"gradsmith bench: --repeat must be >= 1 and --warmup >= 0, got "
                f"--repeat {args.repeat} --warmup {args.warmup}"
            )
        if args.threads is not None:
            if args.threads < 1:
                raise GradsmithUsageError(
                    f"gradsmith bench: --threads must be >= 1, got {args.threads}")
            import torch

            torch.set_num_threads(args.threads)
        cases = _select(list(args.ops))
        if args.list:
            for case in cases:
                console.print(f"{case.name}  [dim]vs {case.reference_name}[/dim]")
            return 0
        if args.plot:
            _require_matplotlib()
        from gradsmith.bench import report as render
        from gradsmith.bench import run as run_bench

        result = run_bench(cases, repeat=args.repeat, warmup=args.warmup, quick=args.quick,
                           progress=lambda name: err.print(f"[dim]measuring {name}...[/dim]"))
    except GradsmithUsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    console.print(render.table(result))
    if args.json:
        render.write_json(result, args.json)
    if args.markdown:
        Path(args.markdown).write_text(render.markdown(result), encoding="utf-8")
    if args.plot:
        render.plot(result, args.plot)
    return 0


def _require_matplotlib() -> None:
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        raise GradsmithUsageError(
            "gradsmith bench --plot needs matplotlib, which is not installed; "
            "install it with: pip install 'gradsmith[html]'  (or: pip install matplotlib)"
        )
