"""Settings of ``gradsmith check`` from ``[tool.gradsmith.check]`` in pyproject.toml, and of
the pytest plugin from its ini options; both validated (an unknown key is an error naming it
and the valid ones). The command line wins over pyproject, pyproject over the defaults.

No torch here: the CLI reads its configuration before anything heavy is imported.
"""

from __future__ import annotations

import argparse
import math
import os
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gradsmith._errors import GradsmithUsageError
from gradsmith.isolation.pool import STARTUP_TIMEOUT

_TABLES = ("check", "lint")  # the tables [tool.gradsmith.*] that exist


@dataclass(frozen=True)
class Setting:
    """One configurable option of ``gradsmith check``.

    Attributes:
        key: its name in ``[tool.gradsmith.check]``.
        dest: the attribute of the parsed command line it fills when the command line leaves
            it unset (``None``; for ``targets``, empty).
        default: the value of ``dest`` when neither sets it.
        convert: validates a pyproject value and returns the value of ``dest``; raises
            ``ValueError`` whose text says what was expected.
        example: a valid line, for the error message.
    """

    key: str
    dest: str
    default: Any
    convert: Callable[[Any], Any]
    example: str


def _positive_number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            math.isfinite(value) and value > 0):
        raise ValueError("a positive number of seconds")
    return float(value)


def _positive_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError("an integer >= 1")
    return value


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError("true or false")
    return value


def _negated_bool(value: Any) -> bool:  # isolate = false  ->  args.no_isolate = True
    return not _bool(value)


def _targets(value: Any) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(
            isinstance(v, str) and v for v in value):
        raise ValueError("a non-empty list of targets (files, directories, dotted modules, "
                         "file.py::Name)")
    return list(value)


def _names(valid: tuple[str, ...] | None) -> Callable[[Any], list[str]]:
    """A list of strings (or one comma-separated string), each one of ``valid`` if given."""

    def convert(value: Any) -> list[str]:
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise ValueError("a list of strings")
        items = [i.strip() for i in items if i.strip()]
        bad = [i for i in items if valid is not None and i not in valid]
        if bad:
            raise ValueError(f"a list of names from {', '.join(valid)} "
                             f"({bad[0]!r} is not one)")
        return items

    return convert


#: Deployment columns a project can require: ``gradsmith.checker.deploy.matrix.COLUMNS``
#: without ``eager`` (a test keeps them equal; this module must not import torch).
DEPLOY_COLUMNS = ("compile", "export", "autocast", "float32", "checkpoint", "torch.func", "onnx")
#: What a project can require (``--require``, ``require = [...]``): the deployment columns,
#: and ``second-order`` (double backward works: a ``double-backward-unsupported`` warning,
#: a backward autograd cannot differentiate, then fails like an error).
REQUIRABLE = (*DEPLOY_COLUMNS, "second-order")

CHECK_SETTINGS = {s.key: s for s in (
    Setting("targets", "targets", [], _targets, 'targets = ["src/my_ops", "tests/fns.py"]'),
    Setting("timeout", "timeout", 30.0, _positive_number, "timeout = 60"),
    Setting("startup-timeout", "startup_timeout", STARTUP_TIMEOUT, _positive_number,
            "startup-timeout = 300"),
    Setting("jobs", "jobs", None, _positive_int, "jobs = 2"),
    Setting("isolate", "no_isolate", False, _negated_bool, "isolate = false"),
    Setting("approximate", "approximate", False, _bool, "approximate = true"),
    # None: the command's default (the deployment checks run) below an example's own compat=
    Setting("compat", "no_compat", None, _negated_bool, "compat = false"),
    Setting("require", "require", None, _names(REQUIRABLE), 'require = ["compile", "export"]'),
    Setting("select", "select", None, _names(None), 'select = ["gradient-mismatch"]'),
    Setting("ignore", "ignore", None, _names(None), 'ignore = ["unneeded-grad"]'),
)}
"""The keys of ``[tool.gradsmith.check]``. A new command-line option that makes sense per
project gets a line here (and its ``dest`` defaults to ``None`` on the command line)."""


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml at or above the directory ``start``, or ``None``."""
    start = Path(start).resolve()
    for folder in (start, *start.parents):
        if (folder / "pyproject.toml").is_file():
            return folder / "pyproject.toml"
    return None


def load_check_config(path: Path | None, cwd: Path | None = None) -> dict[str, Any]:
    """Read and validate ``[tool.gradsmith.check]`` of ``path`` (``None``: no settings).

    Args:
        path: a pyproject.toml.
        cwd: directory the command runs in; path targets in the file are relative to the
            file's folder and are rewritten relative to ``cwd`` (default: the current one).

    Returns:
        Key -> validated value, only for the keys the file sets.

    Raises:
        GradsmithUsageError: unreadable TOML, an unknown table or key (naming it and the
            valid ones), or a value of the wrong type or range (with a valid example).

    Example:
        >>> load_check_config(None)
        {}
    """
    if path is None:
        return {}
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise GradsmithUsageError(f"check: cannot read {path}: {exc}; fix the file or pass "
                                  "another one with --config") from None
    tool = data.get("tool", {}).get("gradsmith", {})
    if not isinstance(tool, dict):
        raise GradsmithUsageError(f"check config {path}: [tool.gradsmith] must be a table")
    unknown_tables = sorted(set(tool) - set(_TABLES))
    if unknown_tables:
        raise GradsmithUsageError(
            f"check config {path}: unknown table [tool.gradsmith.{unknown_tables[0]}]; valid "
            f"tables: {', '.join(f'[tool.gradsmith.{t}]' for t in _TABLES)}")
    table = tool.get("check", {})
    if not isinstance(table, dict):
        raise GradsmithUsageError(f"check config {path}: [tool.gradsmith.check] must be a table")
    settings: dict[str, Any] = {}
    for key, value in table.items():
        setting = CHECK_SETTINGS.get(key)
        if setting is None:
            raise GradsmithUsageError(
                f"check config {path}: unknown key {key!r} in [tool.gradsmith.check]; valid "
                f"keys: {', '.join(sorted(CHECK_SETTINGS))}")
        try:
            settings[key] = setting.convert(value)
        except ValueError as exc:
            raise GradsmithUsageError(
                f"check config {path}: [tool.gradsmith.check] {key} must be {exc}, got "
                f"{value!r}; e.g. {setting.example}") from None
    if "targets" in settings:
        settings["targets"] = resolve_relative(settings["targets"], Path(path).parent, cwd)
    return settings


def resolve_relative(targets: list[str], base: Path, cwd: Path | None = None) -> list[str]:
    """Targets written in a config file are relative to that file's folder.

    Those that name an existing file or directory under ``base`` (with or without ``::Name``)
    are rewritten relative to ``cwd`` (so rows are labelled as if typed there); dotted modules
    and anything else are kept as written.

    Example:
        >>> resolve_relative(["gradsmith.examples"], Path("/nowhere"))
        ['gradsmith.examples']
    """
    cwd = Path(cwd or os.getcwd()).resolve()
    out = []
    for target in targets:
        file, sep, names = target.partition("::")
        candidate = (Path(base) / file).resolve()
        if file and candidate.exists():
            file = os.path.relpath(candidate, cwd)
        out.append(f"{file}{sep}{names}")
    return out


def apply_check_config(args: argparse.Namespace, cwd: Path | None = None) -> Path | None:
    """Fill the options the command line left unset from pyproject, then from the defaults.

    The pyproject is ``args.config`` when given, else the nearest pyproject.toml at or above
    ``cwd``. Precedence: command line > ``[tool.gradsmith.check]`` > built-in default.

    Returns:
        The pyproject.toml read, or ``None``.

    Raises:
        GradsmithUsageError: see :func:`load_check_config`; also a ``--config`` file that
            does not exist.
    """
    cwd = Path(cwd or os.getcwd())
    path = getattr(args, "config", None)
    if path is not None and not Path(path).is_file():
        raise GradsmithUsageError(f"check: --config {path}: no such file; pass a "
                                  "pyproject.toml with a [tool.gradsmith.check] table")
    path = Path(path) if path is not None else find_pyproject(cwd)
    settings = load_check_config(path, cwd)
    for key, setting in CHECK_SETTINGS.items():
        given = getattr(args, setting.dest, None)
        if given is None or (key == "targets" and not given):
            setattr(args, setting.dest, settings.get(key, setting.default))
    return path
