"""``gradsmith bench [OPS|TARGETS...] [--mode eager|compiled|both] [--json FILE] [--markdown FILE] [--plot FILE.png] ...``.

Each argument is a catalog op name (``gradsmith bench --list``) or, like ``gradsmith check``, a
target: a file, a directory, a dotted module, or ``FILE::Fn``. Exit codes: 0 measured, 1 a
target could not be measured (its row says why), 2 usage error (unknown op or target, bad
option, matplotlib missing for --plot). The library does the work (:mod:`gradsmith.bench`);
this module parses and prints.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gradsmith._errors import GradsmithUsageError
from gradsmith.cli import usage_error
from gradsmith.isolation.processes import usable_cpus

_SUFFIX = {"json": "json", "markdown": "md", "plot": "png"}
_MODES = {"eager": ("eager",), "compiled": ("compiled",), "both": ("eager", "compiled")}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``gradsmith bench``."""
    parser.add_argument("ops", nargs="*", metavar="OP|TARGET",
                        help="catalog ops (--list shows the names) and/or your own code: "
                             "file.py, file.py::Fn, a directory or a dotted module "
                             "(default: the whole catalog)")
    parser.add_argument("--mode", choices=tuple(_MODES), default="both",
                        help="eager, torch.compile'd, or both (default), on both sides")
    parser.add_argument("--json", metavar="FILE", help="also write the full report as JSON")
    parser.add_argument("--markdown", metavar="FILE", help="also write the table as markdown")
    parser.add_argument("--plot", metavar="FILE.png",
                        help="chart of the ratios (needs matplotlib: gradsmith[html])")
    parser.add_argument("--repeat", type=int, default=10, metavar="N",
                        help="timed interleaved runs per op and reference (default 10)")
    parser.add_argument("--warmup", type=int, default=2, metavar="N",
                        help="untimed runs first (default 2)")
    parser.add_argument("--threads", type=int, default=None, metavar="N",
                        help="torch.set_num_threads(N) first (default: torch's default)")
    parser.add_argument("--device", default="auto", metavar="DEV",
                        help="cpu, cuda or auto (default: cuda when a GPU is available)")
    parser.add_argument("--timeout", type=float, default=600.0, metavar="S",
                        help="seconds per Function and example of your own code, all modes "
                             "(default 600); a hang becomes a row with an error")
    parser.add_argument("--no-isolate", action="store_true",
                        help="run your code in this process instead of a worker process")
    parser.add_argument("--quick", action="store_true",
                        help="small catalog inputs: the whole registry in seconds (CI smoke test)")
    parser.add_argument("--list", action="store_true", help="list the catalog op names and exit")


def _is_target(name: str) -> bool:
    return ("::" in name or "/" in name or name.endswith(".py") or "." in name
            or Path(name).exists())


def _select(names: list[str]):
    """Split the arguments into catalog cases and resolved targets of user code."""
    from gradsmith.bench import registry

    cases = registry()
    chosen, targets, unknown = [], [], []
    for name in names:
        if name in cases:
            chosen.append(cases[name])
        elif _is_target(name):
            targets.append(name)
        else:
            unknown.append(name)
    if unknown:
        raise GradsmithUsageError(
            f"gradsmith bench: unknown op {', '.join(map(repr, unknown))}; known ops: "
            f"{', '.join(cases)}; or give your own code as file.py, file.py::Fn, a directory "
            "or a dotted module")
    sources = []
    if targets:
        from gradsmith.discovery import resolve_targets

        try:
            sources = resolve_targets(targets)
        except GradsmithUsageError as exc:
            raise GradsmithUsageError(str(exc).replace("check:", "gradsmith bench:", 1)) from None
    if not names:
        chosen = list(cases.values())
    return chosen, sources


def _validate(args: argparse.Namespace) -> None:
    if args.repeat < 1 or args.warmup < 0:
        raise GradsmithUsageError(
            f"gradsmith bench: --repeat must be >= 1 and --warmup >= 0, got "
            f"--repeat {args.repeat} --warmup {args.warmup}")
    cpus = usable_cpus()
    if args.threads is not None and not 1 <= args.threads <= cpus:
        raise GradsmithUsageError(
            f"gradsmith bench: --threads must be between 1 and {cpus} (the CPUs this process "
            f"may use), got {args.threads}; e.g. --threads 1")
    if not args.timeout > 0:
        raise GradsmithUsageError(
            f"gradsmith bench: --timeout must be a positive number of seconds, got "
            f"{args.timeout:g}; e.g. --timeout 600")
    if args.plot:
        _require_matplotlib()
    _validate_paths(args)


def _device(name: str):
    import torch

    from gradsmith.bench.runner import check_device

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return check_device(name)


def run(args: argparse.Namespace) -> int:
    """Run the benchmark; return the exit code."""
    from rich.console import Console

    console = Console()
    if not console.is_terminal:  # piped or redirected: do not wrap the table at 80 columns
        console = Console(width=200)
    err = Console(stderr=True)
    try:
        _validate(args)
        if args.threads is not None:
            import torch

            torch.set_num_threads(args.threads)
        cases, sources = _select(list(args.ops))
        if args.list:
            for case in cases:
                console.print(f"{case.name}  [dim]vs {case.reference_name}[/dim]")
            return 0
        device = _device(args.device)
        result, failed = _measure(args, cases, sources, device,
                                  lambda name: err.print(f"[dim]measuring {name}...[/dim]"))
    except GradsmithUsageError as exc:
        print(usage_error("bench", str(exc)), file=sys.stderr)
        return 2
    from gradsmith.bench import report as render

    console.print(render.table(result))
    if args.json:
        render.write_json(result, args.json)
    if args.markdown:
        text = f"{render.title(result, full=True)}\n\n{render.markdown(result)}"
        Path(args.markdown).write_text(text, encoding="utf-8")
    if args.plot:
        render.plot(result, args.plot)
    return 1 if failed else 0


def _measure(args, cases, sources, device, progress):
    import torch

    from gradsmith.bench.runner import report_of, run_case

    modes = _MODES[args.mode]
    rows = []
    for case in cases:
        for mode in modes:
            progress(f"{case.name} ({mode})")
            rows.append(run_case(case, repeat=args.repeat, warmup=args.warmup,
                                 quick=args.quick, mode=mode, device=device))
    if sources:
        from gradsmith.bench.session import run_targets

        options = {"repeat": args.repeat, "warmup": args.warmup, "modes": modes,
                   "device": str(device)}
        run = run_targets(sources, options, isolate=not args.no_isolate, timeout=args.timeout,
                          threads=args.threads or torch.get_num_threads(), progress=progress)
        if run.usage_errors:
            raise GradsmithUsageError("\n".join(run.usage_errors))
        rows.extend(run.rows)
    report = report_of(rows, repeat=args.repeat, warmup=args.warmup, quick=args.quick,
                       device=device)
    return report, any(r.get("error") for r in rows)


def _validate_paths(args: argparse.Namespace) -> None:
    from gradsmith.cli._paths import writable_file  # imports gradsmith.discovery: only here

    for option in ("json", "markdown", "plot"):
        value = getattr(args, option)
        if value is not None and not value.strip():
            raise GradsmithUsageError(
                f"gradsmith bench: --{option} needs a file name, got an empty string (an unset "
                f"shell variable?); e.g. --{option} bench.{_SUFFIX[option]}")
        if value:
            writable_file("gradsmith bench", f"--{option}", value)


def _require_matplotlib() -> None:
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        raise GradsmithUsageError(
            "gradsmith bench --plot needs matplotlib, which is not installed; "
            "install it with: pip install 'gradsmith[html]'  (or: pip install matplotlib)"
        )
