"""Helpers the discovery tests share: a source text written to a file, checked by gradsmith and
imported as the user's module; and the import-layout tests' check of one ``Clip`` file."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import torch

from gradsmith.checkrun.session import run_check
from gradsmith.cli import main
from gradsmith.discovery import Source
from gradsmith.discovery.collect import load_module


def write(path: Path, source: str) -> str:
    """``source`` dedented into ``path`` (its folders made); returns the path as a string."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source))
    return str(path)


def check_rows(path: Path, source: str) -> dict[str, dict]:
    """``gradsmith check`` (in process) of every Function in ``source`` written to ``path``:
    its rows by class name."""
    write(path, source)
    result = run_check([Source("file", str(path), path.name)], isolate=False)
    return {row["name"].rsplit("::", 1)[-1]: row for row in result.rows}


def load_source(path: Path, name: str):
    """The module at ``path`` imported as ``name``, its source readable (the hints parse it)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def error_codes(row: dict) -> set[str]:
    return {f["code"] for f in row["report"]["findings"] if f["severity"] == "error"}


def assert_clip_checked(tmp_path, capsys, monkeypatch, path: str, factor: str) -> None:
    """The file's ``Clip`` (a clamp whose backward is off by ``factor``) imports, agrees with
    autograd of clamp times ``factor``, and ``gradsmith check`` passes it exactly when
    ``factor`` is 1."""
    module = load_module("file", path)
    x = torch.tensor([-2.0, -0.5, 0.5, 2.0], dtype=torch.float64, requires_grad=True)
    (got,) = torch.autograd.grad(module.Clip.apply(x).sum(), x)
    y = x.detach().clone().requires_grad_()
    (want,) = torch.autograd.grad(y.clamp(-1, 1).sum(), y)
    torch.testing.assert_close(got, want * float(factor))
    monkeypatch.chdir(tmp_path)
    code = main(["check", f"{path}::Clip", "--no-isolate", "--no-compat"])
    out = capsys.readouterr().out
    assert "import failed" not in out
    assert (code == 0) is (factor == "1")
    assert ("1 passed" in out) is (factor == "1")
    if factor != "1":
        assert "gradient-mismatch" in out
