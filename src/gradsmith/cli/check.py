"""``gradsmith check``: arguments, and the glue from the command line to the library.

Exit codes: 0 at least one Function checked and none failed (skips allowed); 1 a failure, or
nothing could be checked (only skips); 2 a usage or import error (bad path, unknown ``::Name``,
syntax or import error in a target, bad option).
"""

from __future__ import annotations

import argparse
import math
import os

from gradsmith._config import apply_check_config
from gradsmith._errors import GradsmithError
from gradsmith.cli import usage_error
from gradsmith.isolation.pool import STARTUP_TIMEOUT


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``gradsmith check``."""
    parser.add_argument(
        "targets", nargs="*", metavar="TARGET",
        help="file, directory, dotted module, or file.py::Name / module::Name "
             "(default: targets in [tool.gradsmith.check], else the embedded examples and "
             "the op catalog)")
    parser.add_argument("--format", choices=("text", "json", "github", "sarif"),
                        default="text",
                        help="text table (default), a JSON document, GitHub Actions annotations "
                             "or a SARIF 2.1.0 log (code scanning) on stdout")
    parser.add_argument("--html", metavar="FILE",
                        help="write a self-contained HTML report with Jacobian heatmaps of "
                             "gradient mismatches (needs: pip install 'gradsmith[html]')")
    # Options that [tool.gradsmith.check] may set default to None here: gradsmith._config
    # fills what the command line left unset (command line > pyproject > built-in default).
    parser.add_argument("--timeout", type=float, default=None, metavar="S",
                        help="seconds allowed per Function and example for its eager checks "
                             "(default 30), and as many again for each deployment check; "
                             "worker start-up, torch's warm-up and importing your module "
                             "(bounded by --startup-timeout) are not counted; a hang "
                             "becomes a failed row")
    parser.add_argument("--jobs", "-j", type=int, default=None, metavar="N",
                        help="Functions checked at once (default: number of CPUs, at most 4; "
                             "capped at what the CPUs and memory can hold)")
    parser.add_argument("--startup-timeout", type=float, default=None, metavar="S",
                        help=f"seconds the worker may take to start (import torch; default "
                             f"{STARTUP_TIMEOUT:g}), and each import of your code; raise it "
                             "on a heavily loaded machine "
                             "(also startup-timeout in pyproject)")
    parser.add_argument("--no-isolate", dest="no_isolate", action="store_const", const=True,
                        default=None,
                        help="run user code in this process: faster start, but a crash or hang "
                             "takes the run down and --timeout is not enforced")
    parser.add_argument("--isolate", dest="no_isolate", action="store_const", const=False,
                        help="run user code in worker processes (the default; overrides "
                             "isolate = false in pyproject)")
    parser.add_argument("-k", dest="pattern", metavar="PATTERN",
                        help="only check names containing PATTERN (globs * ? allowed)")
    parser.add_argument("--approximate", action="store_const", const=True, default=None,
                        help="judge gradient quality (relative error <= 1e-2, cosine >= "
                             "0.99) instead of exact agreement: for wrappers of external code")
    parser.add_argument("--no-approximate", dest="approximate", action="store_const",
                        const=False, help="judge exactly (overrides approximate = true in "
                                          "pyproject)")
    parser.add_argument("--config", metavar="PYPROJECT",
                        help="pyproject.toml with a [tool.gradsmith.check] table (default: the "
                             "nearest one at or above the working directory)")
    parser.add_argument("--repro", metavar="DIR",
                        help="write one standalone plain-PyTorch script per failure into DIR "
                             "(exact inputs and seed; prints the same numbers, no gradsmith "
                             "import)")
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="print every report in full: each finding (info ones too), the "
                             "checks run and skipped, the full fixes, passing Functions too")
    parser.add_argument("--quiet", "-q", action="store_true",
                        help="print only the failing Functions and the summary line (text "
                             "format)")
    parser.add_argument("--no-compat", dest="no_compat", action="store_const", const=True,
                        default=None,
                        help="skip the deployment checks (compile, export, autocast, float32, "
                             "checkpoint, torch.func) and the compatibility matrix")
    parser.add_argument("--compat", dest="no_compat", action="store_const", const=False,
                        help="run the deployment checks (the default; overrides compat = false "
                             "in pyproject)")
    parser.add_argument("--exit-zero", action="store_true",
                        help="exit 0 even when a Function fails (2 still means a usage or "
                             "import error)")
    parser.add_argument("--compile-backend", choices=("aot_eager", "inductor", "eager"),
                        default=None,
                        help="torch.compile backend of the compile check (default aot_eager; "
                             "inductor generates code: seconds per Function)")
    parser.add_argument("--require", default=None, metavar="COLUMNS",
                        help="comma-separated deployment columns that must hold (compile, "
                             "export, autocast, float32, checkpoint, torch.func, onnx) and "
                             "second-order (double backward works): their warnings fail the "
                             "run like errors (also require in pyproject); onnx runs only "
                             "when required (needs the onnx extra)")
    parser.add_argument("--device", default=None, metavar="DEV",
                        help="where synthesised inputs live: auto (default: a CUDA GPU when "
                             "the code defines Triton kernels that run natively, else the CPU), "
                             "cpu, cuda or cuda:N (also GRADSMITH_DEVICE)")
    parser.add_argument("--select", default=None, metavar="CODES",
                        help="comma-separated finding codes or prefixes to report, the rest "
                             "dropped (e.g. gradient-mismatch,compile-; also in pyproject)")
    parser.add_argument("--ignore", default=None, metavar="CODES",
                        help="comma-separated finding codes or prefixes to drop (e.g. "
                             "unneeded-grad; also in pyproject)")
    parser.add_argument("--explain", default=None, metavar="CODE",
                        help="print a finding code's severity, check, cause and fix, and "
                             "exit (e.g. gradient-mismatch; 'all' lists every code)")


def run(args: argparse.Namespace) -> int:
    """Run the check described by ``args``; return the exit code."""
    from rich.console import Console

    from gradsmith.cli._text import escape

    err = Console(stderr=True, highlight=False)
    if args.explain is not None:
        from gradsmith.checker.code_docs import explain

        try:
            print(explain(args.explain))
        except GradsmithError as exc:
            err.print(f"[red]{escape(usage_error('check', str(exc)))}[/red]", soft_wrap=True)
            return 2
        return 0
    try:
        apply_check_config(args)
        _validate(args)
        policy = _policy(args)
        sources = _sources(args.targets)
    except GradsmithError as exc:
        err.print(f"[red]{escape(usage_error('check', str(exc)))}[/red]", soft_wrap=True)
        return 2
    from gradsmith.checkrun.session import run_check
    from gradsmith.cli._check_output import Output

    output = Output(args.format, verbose=args.verbose, quiet=args.quiet)
    output.status("starting")  # on a terminal, something on screen at once
    jobs = _jobs(args.jobs, err) if not args.no_isolate else 1
    try:
        result = run_check(
            sources,
            options=_options(args),
            isolate=not args.no_isolate,
            jobs=jobs,
            timeout=args.timeout,
            startup_timeout=args.startup_timeout,
            html=bool(args.html),
            pattern=args.pattern,
            progress=output.progress,
            status=output.status,
            eager=output.eager,
        )
    except GradsmithError as exc:  # the worker pool could not start at all
        output.close()
        err.print(f"[red]{escape(usage_error('check', str(exc)))}[/red]", soft_wrap=True)
        return 2
    except KeyboardInterrupt:  # workers are already stopped by the pool's context manager
        output.close()
        err.print("interrupted")
        return 130
    except SystemExit:  # SIGTERM or SIGHUP (see gradsmith.cli.main): likewise, then exit
        output.close()
        raise
    output.close()
    for message in result.usage_errors:
        err.print(f"[red]{escape(usage_error('check', message))}[/red]", soft_wrap=True)
    from gradsmith import _check_policy

    _check_policy.apply(result.rows, **policy)
    if args.format in ("github", "sarif"):
        from gradsmith.cli._check_formats import render

        print(render(result, args.format))
    else:
        output.render(result, args.targets)
    if args.repro:
        from gradsmith.repro import write_scripts

        written = write_scripts(args.repro, result.rows)
        if args.format == "text":
            output.console.print(f"{len(written)} repro script(s) written to "
                                 f"{escape(str(args.repro))}")
    if args.html:
        from gradsmith.cli.html import write_html

        write_html(args.html, result)
        if args.format == "text":
            output.console.print(f"HTML report written to {escape(str(args.html))}")
    code = result.exit_code()
    return 0 if code == 1 and args.exit_zero else code


def _options(args: argparse.Namespace) -> dict:
    """Options for gradsmith.check that override every example's own."""
    options: dict = {"approximate": True} if args.approximate else {}
    if args.repro:
        options["_repro_full"] = True  # every tensor's values, however large
    if args.no_compat:
        options["compat"] = False
    elif args.no_compat is None:  # the command's default, below an example's own compat=
        options["_defaults"] = {"compat": True}
    else:
        options["compat"] = True
    if args.compile_backend:
        options["compile_backend"] = args.compile_backend
    from gradsmith._check_policy import split

    if "onnx" in split("--require", args.require or []):
        options["onnx"] = True  # opt-in: the only way the CLI runs it
    return options


def _policy(args: argparse.Namespace) -> dict:
    """``--select``, ``--ignore`` and ``--require`` (or pyproject's), validated."""
    from gradsmith._check_policy import (
        EAGER_REQUIRABLE,
        split,
        validate_codes,
        validate_require,
    )

    require = validate_require("--require", split("--require", args.require or []))
    deploy = [r for r in require if r not in EAGER_REQUIRABLE]  # second-order is eager
    if deploy and args.no_compat:
        raise GradsmithError(f"check: --require {','.join(deploy)} needs the deployment "
                             "checks, which --no-compat (or compat = false) turns off; drop "
                             "one of them")
    return {"select": validate_codes("--select", split("--select", args.select or [])),
            "ignore": validate_codes("--ignore", split("--ignore", args.ignore or [])),
            "require": _onnx_ready(require)}


def _onnx_ready(require: list[str]) -> list[str]:
    """``--require onnx`` without the onnx extra is a usage error naming it, never a pass."""
    if "onnx" in require:
        from gradsmith._requires import require_onnx

        require_onnx("check", "--require onnx (or require = [\"onnx\"] in pyproject)")
    return require


def _jobs(asked: int | None, err) -> int:
    """``--jobs``, or the default, capped at what the machine can run at once."""
    from gradsmith.isolation.pool import capacity

    cap, why = capacity()
    if asked is None:
        return min(4, cap)
    if asked > cap:
        err.print(f"note: --jobs {asked} capped at {cap}: this machine can run {cap} checks "
                  f"at once ({why})", soft_wrap=True)
        return cap
    return asked


def _validate(args: argparse.Namespace) -> None:
    for option, value in (("--timeout", args.timeout), ("--startup-timeout",
                                                         args.startup_timeout)):
        if not (value > 0 and math.isfinite(value)):
            raise GradsmithError(f"check: {option} must be a positive number of seconds, got "
                                 f"{value:g}; e.g. {option} 60")
    if args.device is not None:
        from gradsmith.discovery.placement import ENV, parse

        os.environ[ENV] = parse(args.device)  # the workers inherit it
    if args.jobs is not None and args.jobs < 1:
        raise GradsmithError(f"check: --jobs must be >= 1, got {args.jobs}; e.g. --jobs 2")
    for option, value in (("--repro", args.repro), ("--html", args.html)):
        if value is not None and not value.strip():
            raise GradsmithError(f"check: {option} needs a path, got an empty string (an "
                                 f"unset shell variable?); e.g. {option} "
                                 f"{'repro/' if option == '--repro' else 'report.html'}")
    if args.repro and os.path.exists(args.repro) and not os.path.isdir(args.repro):
        raise GradsmithError(f"check: --repro {args.repro!r} is a file, expected a directory "
                             "(created if missing); e.g. --repro repro/")
    if args.repro:
        from gradsmith.cli._paths import writable_dir

        writable_dir("check", "--repro", args.repro)
    if args.html:
        from gradsmith.cli._paths import writable_file
        from gradsmith.cli.html import require_matplotlib

        require_matplotlib()
        writable_file("check", "--html", args.html)


def _sources(targets: list[str]):
    from gradsmith.discovery import default_sources, resolve_targets

    return resolve_targets(targets) if targets else default_sources()

