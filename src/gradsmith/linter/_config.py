"""Configuration from ``[tool.gradsmith.lint]`` in pyproject.toml."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from gradsmith._errors import GradsmithError, GradsmithUsageError

_KEYS = {"select", "ignore", "extend-ignore", "exclude", "per-file-ignores"}


@dataclass
class Config:
    """Settings of a lint run.

    Attributes:
        select: Codes or prefixes to report (default: all).
        ignore: Codes or prefixes not to report.
        exclude: Path globs not to lint.
        per_file_ignores: Glob -> codes ignored in matching files.
        path: The pyproject.toml the settings came from, if any.
    """

    select: list[str] | None = None
    ignore: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    path: Path | None = None


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml at or above ``start``."""
    start = start.resolve()
    for folder in [start, *start.parents] if start.is_dir() else start.parents:
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def _codes(value, key: str, path: Path) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise GradsmithError(
            f"lint config {path}: [tool.gradsmith.lint] {key} must be a list of codes such as "
            f'["GS1", "GS203"], got {value!r}; fix the value in pyproject.toml'
        )
    return [v.strip().upper() for v in value]


def load(path: Path | None) -> Config:
    """Read ``[tool.gradsmith.lint]`` from ``path`` (no file: defaults).

    Raises:
        GradsmithUsageError: unreadable TOML or unknown keys, naming the file and the fix.

    Example:
        >>> load(None).select is None
        True
    """
    if path is None:
        return Config()
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise GradsmithUsageError(
            f"lint config: cannot read {path}: {exc}; pass a valid pyproject.toml to --config"
        ) from None
    table = data.get("tool", {}).get("gradsmith", {}).get("lint", {})
    unknown = set(table) - _KEYS
    if unknown:
        raise GradsmithUsageError(
            f"lint config {path}: unknown key(s) {sorted(unknown)} in [tool.gradsmith.lint]; "
            f"expected some of {sorted(_KEYS)}"
        )
    cfg = Config(path=Path(path))
    if "select" in table:
        cfg.select = _codes(table["select"], "select", path)
    cfg.ignore = _codes(table.get("ignore", []), "ignore", path) + _codes(
        table.get("extend-ignore", []), "extend-ignore", path)
    exclude = table.get("exclude", [])
    cfg.exclude = exclude if isinstance(exclude, list) else [exclude]
    pfi = table.get("per-file-ignores", {})
    if not isinstance(pfi, dict):
        raise GradsmithUsageError(
            f"lint config {path}: per-file-ignores must be a table of glob = [codes], got {pfi!r}"
        )
    cfg.per_file_ignores = {glob: _codes(codes, "per-file-ignores", path) for glob, codes in pfi.items()}
    return cfg
