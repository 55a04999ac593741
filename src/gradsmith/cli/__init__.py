"""The ``gradsmith`` command: a thin dispatcher to ``check``, ``lint`` and ``bench``.

Each subcommand's arguments and output live in ``gradsmith.cli.<name>``, which calls the
library; nothing in the library imports this module.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from gradsmith import __version__

SUBCOMMANDS = {
    "check": "verify custom autograd Functions (gradients, 2nd order, jvp/vmap, mutation, ...)",
    "lint": "static analysis of autograd.Function code, with safe fixes",
    "bench": "speed and saved-for-backward memory of catalog ops against their references",
}
# Subcommands that run PyTorch code; `lint` never imports torch (torch is an optional dependency).
NEEDS_TORCH = ("check", "bench")


def usage_error(command: str, message: str) -> str:
    """The one form of every usage error, argparse's own: ``gradsmith <command>: error: ...``.

    A message that already names the command (``lint: path ...``) is not prefixed twice.

    Example:
        >>> usage_error("lint", "lint: path 'x.py' does not exist")
        "gradsmith lint: error: path 'x.py' does not exist"
    """
    for prefix in (f"gradsmith {command}: ", f"{command}: "):
        if message.startswith(prefix):
            message = message[len(prefix):]
            break
    return f"gradsmith {command}: error: {message}"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gradsmith",
        description="Tools for people who write custom PyTorch gradients.",
    )
    parser.add_argument("--version", action="version", version=f"gradsmith {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text in SUBCOMMANDS.items():
        module = importlib.import_module(f"gradsmith.cli.{name}")
        p = sub.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(p)
        p.set_defaults(_run=module.run, _parser=p)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point. Returns the exit code: 0 success, 1 findings/failures, 2 usage error.

    A reader that closes stdout early (``gradsmith lint | head``) ends the command quietly
    with 141, as SIGPIPE would; stdout that cannot be written (a full disk) is one line on
    stderr and 2 (see :mod:`gradsmith.cli._output_errors`).

    Args:
        argv: arguments; ``None`` means the process's own command line (the ``gradsmith``
            console script, ``python -m gradsmith``): the process is then gradsmith's alone
            and adopts the orphans of what its run starts, so it can kill them at the end.
    """
    from gradsmith.cli._output_errors import StdoutError, exit_status, guarded_stdout

    command = None
    try:
        with guarded_stdout():
            command = (argv if argv is not None else sys.argv[1:])[:1]
            command = command[0] if command and command[0] in SUBCOMMANDS else None
            return _main(argv)
    except StdoutError as exc:
        return exit_status(exc, command)


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    try:
        args, unknown = parser.parse_known_args(argv)
        if unknown:  # with the subcommand's usage, not the top-level one
            unknown_text = " ".join(unknown)
            getattr(args, "_parser", parser).error(f"unrecognized arguments: {unknown_text}")
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    if args.command in NEEDS_TORCH:
        from gradsmith._requires import TorchMissingError, require_torch

        try:
            require_torch(f"gradsmith {args.command}")
        except TorchMissingError as exc:
            print(usage_error(args.command, str(exc)), file=sys.stderr)
            return 2
        if argv is None:  # not when called from another program: its children are its own
            import signal

            from gradsmith.isolation.processes import become_subreaper

            become_subreaper()
            # A cancelled CI job (SIGTERM) or a closed terminal (SIGHUP) unwinds like Ctrl-C:
            # the worker is stopped and the temporary files are removed on the way out.
            for sig in (signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, _exit_on_signal)
    return int(args._run(args))


def _exit_on_signal(signum: int, frame: object) -> None:
    import signal

    signal.signal(signum, signal.SIG_IGN)  # a second one must not cut the cleanup short
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    raise SystemExit(main())
