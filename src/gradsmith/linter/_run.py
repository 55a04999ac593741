"""One lint run: files -> findings, filtered by select/ignore/noqa, optionally fixed."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from gradsmith._errors import GradsmithError
from gradsmith.linter import _config
from gradsmith.linter._engine import RawFile, analyse, iter_files, selected, suppressed
from gradsmith.linter._finding import LintFinding
from gradsmith.linter._fix import (
    MAX_ROUNDS,
    FileChangedError,
    apply_edits,
    edits_by_path,
    unified_diff,
    write_file,
)
from gradsmith.linter._registry import RULES
from gradsmith.linter._source import decode, encode, split_lines


@dataclass
class Options:
    """Resolved settings: explicit arguments override the pyproject configuration."""

    select: list[str] | None = None
    ignore: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)


def _check_codes(codes: Iterable[str] | None, arg: str) -> list[str] | None:
    if codes is None:
        return None
    if isinstance(codes, str):
        codes = [c for c in codes.replace(",", " ").split() if c]
    out = [c.strip().upper() for c in codes]
    for code in out:
        if not code.startswith("GS") or not any(r.startswith(code) for r in RULES):
            raise GradsmithError(
                f"lint: {arg} got {code!r}, which matches no rule; expected a code or prefix "
                f"such as 'GS1' or 'GS203' (see docs/lint.md)"
            )
    return out


def options(paths: list[str], select=None, ignore=None, config=None) -> Options:
    """Merge arguments with ``[tool.gradsmith.lint]`` (``config=False`` disables it)."""
    cfg = _config.Config()
    if config is not False:
        path = Path(config) if config else _config.find_pyproject(Path(paths[0]) if paths else Path.cwd())
        if config and not path.is_file():
            raise GradsmithError(
                f"lint: config file {str(config)!r} does not exist; pass the path of a "
                f"pyproject.toml containing [tool.gradsmith.lint]"
            )
        cfg = _config.load(path)
    sel = _check_codes(select, "select")
    ign = _check_codes(ignore, "ignore")
    return Options(
        select=sel if sel is not None else _check_codes(cfg.select, "select"),
        ignore=ign if ign is not None else (_check_codes(cfg.ignore, "ignore") or []),
        exclude=list(cfg.exclude),
        per_file_ignores=cfg.per_file_ignores,
    )


def gather(paths: list[str], opts: Options) -> list[RawFile]:
    for p in paths:
        if not os.path.exists(p):
            raise GradsmithError(
                f"lint: path {p!r} does not exist; pass existing files or directories "
                f"(or source text via lint(source=...))"
            )
    return iter_files(paths, opts.exclude)


def _keep(f: LintFinding, opts: Options, lines: dict[str, list[str]]) -> bool:
    if not selected(f.code, opts.select, opts.ignore):
        return False
    for glob, codes in opts.per_file_ignores.items():
        if fnmatch.fnmatch(Path(f.path).as_posix(), glob) or fnmatch.fnmatch(Path(f.path).name, glob):
            if any(f.code.startswith(c) for c in codes):
                return False
    return not suppressed(f, lines.get(f.path, []))


def _lines(raws: list[RawFile], paths: set[str]) -> dict[str, list[str]]:
    out = {}
    for raw in raws:
        if raw.path not in paths:
            continue
        try:
            out[raw.path] = split_lines(decode(raw.data))
        except Exception:  # undecodable: nothing to suppress
            out[raw.path] = []
    return out


def run(raws: list[RawFile], opts: Options) -> list[LintFinding]:
    """Lint files and filter; sorted and de-duplicated."""
    findings = analyse(raws)
    lines = _lines(raws, {f.path for f in findings})
    unique = {(f.path, f.line, f.col, f.code): f for f in findings if _keep(f, opts, lines)}
    return sorted(unique.values(), key=LintFinding.sort_key)


@dataclass
class FixResult:
    """Outcome of :func:`fix`: new texts, their diffs, and the findings left afterwards.

    ``data`` holds each changed file's new bytes (in its own encoding), ``original`` the bytes
    it was read with and ``counts`` how many fixes it got.
    """

    texts: dict[str, str]
    diffs: dict[str, str]
    applied: int
    findings: list[LintFinding]
    data: dict[str, bytes] = field(default_factory=dict)
    original: dict[str, bytes] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    def write(self) -> dict[str, str]:
        """Replace each changed file on disk, whole (see :func:`~gradsmith.linter._fix.write_file`).

        Returns:
            ``{path: reason}`` for the files not written; each of them is left as it is.
        """
        failed: dict[str, str] = {}
        done: dict[str, bytes] = {}  # one file named twice (a link and its target): once
        for path in sorted(self.data):
            real = os.path.realpath(path)
            if real in done:
                if done[real] != self.data[path]:
                    failed[path] = "it is the same file as another path given; not fixed twice"
                continue
            try:
                write_file(path, self.data[path], self.original[path])
                done[real] = self.data[path]
            except FileChangedError as exc:
                failed[path] = str(exc)
            except OSError as exc:
                reason = exc.strerror or str(exc)
                failed[path] = f"cannot write it ({reason}); the file is unchanged"
        return failed


def fix(raws: list[RawFile], opts: Options) -> FixResult:
    """Apply safe fixes until no fixable finding remains (or MAX_ROUNDS)."""
    original = {r.path: r.data for r in raws}
    applied, counts = 0, {}
    findings = run(raws, opts)
    for _ in range(MAX_ROUNDS):
        edits = edits_by_path(findings)
        changed = False
        for raw in raws:
            if raw.path not in edits:
                continue
            text = decode(raw.data)
            new, n = apply_edits(text, edits[raw.path])
            if n and new != text:
                try:
                    raw.data = encode(new, raw.data)  # the file's own encoding and BOM
                except UnicodeEncodeError:  # a fix the file's encoding cannot hold: none
                    continue
                applied += n
                counts[raw.path] = counts.get(raw.path, 0) + n
                changed = True
        if not changed:
            break
        findings = run(raws, opts)
    result = FixResult({}, {}, applied, findings)
    for raw in raws:
        if raw.data != original[raw.path]:
            before, after = decode(original[raw.path]), decode(raw.data)
            result.texts[raw.path] = after
            result.diffs[raw.path] = unified_diff(raw.path, before, after)
            result.data[raw.path], result.original[raw.path] = raw.data, original[raw.path]
            result.counts[raw.path] = counts.get(raw.path, 0)
    return result
