"""Shared helpers. Fixtures are linted, never imported: keep pytest out of them."""

from __future__ import annotations

import importlib.util
import re
from collections import Counter
from pathlib import Path

import pytest

collect_ignore = ["fixtures"]

FIXTURES = Path(__file__).parent / "fixtures"
_CODE = re.compile(r"\b(GS\d{3})\b")


def _expected(root: Path) -> Counter:
    """Counter of (relative path, line, code) from inline ``# GS101`` comments under ``root``."""
    files = [root] if root.is_file() else sorted(root.rglob("*.py"))
    base = root.parent if root.is_file() else root
    out: Counter = Counter()
    for path in files:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "#" in line:
                for code in _CODE.findall(line.split("#", 1)[1]):
                    out[(path.relative_to(base).as_posix(), number, code)] += 1
    return out


@pytest.fixture
def expected():
    return _expected


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES


def _load(path: Path, name: str):
    """Import a fixture file as a module (the run-time tests execute what lint reads)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def load_fixture():
    """``load_fixture(path, module_name)``: a fixture file imported as a module."""
    return _load

