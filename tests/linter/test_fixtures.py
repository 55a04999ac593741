"""Every fixture finding is annotated on its line, and every annotation is found."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from gradsmith.linter import lint

FIXTURES = Path(__file__).parent / "fixtures"
UNITS = sorted(p for p in FIXTURES.iterdir() if p.suffix == ".py" or p.is_dir())


@pytest.mark.parametrize("unit", UNITS, ids=lambda p: p.name)
def test_fixture_findings_match_inline_expectations(unit: Path, expected):
    base = unit.parent if unit.is_file() else unit
    got = Counter(
        (Path(f.path).resolve().relative_to(base.resolve()).as_posix(), f.line, f.code)
        for f in lint(unit, config=False)
    )
    want = expected(unit)
    if unit.name != "precision.py":
        assert want, f"{unit.name} has no expectations"
    assert sorted((want - got).elements()) == [], "missed"
    assert sorted((got - want).elements()) == [], "unexpected"


def test_precision_fixture_is_clean():
    """Correct-but-suspicious code (mark_dirty, clones, setup_context, *args) gives nothing."""
    assert lint(FIXTURES / "precision.py", config=False) == []


def test_cross_module_base_is_resolved_only_with_its_module():
    """Derived classes are Functions only because base.py resolves to torch's Function."""
    alone = lint(FIXTURES / "crossmod" / "derived.py", config=False)
    together = lint(FIXTURES / "crossmod", config=False)
    assert not alone
    assert {f.code for f in together} >= {"GS101", "GS111", "GS112"}


def test_messages_are_one_short_line():
    """flake8/ruff style: the why and the fix live in docs/lint.md and --explain."""
    findings = [f for unit in UNITS for f in lint(unit, config=False)]
    assert len(findings) > 50
    for f in findings:
        assert "\n" not in f.message and len(f.message) <= 100, (f.code, f.message)
        assert " Fix: " not in f.message
