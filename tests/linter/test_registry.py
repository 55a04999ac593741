"""The registry: unique, well-formed, documented codes, each with a fixture and examples."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradsmith.linter import RULES, lint
from gradsmith.linter._registry import GROUPS, Rule, define

DOCS = Path(__file__).parents[2] / "docs" / "lint.md"
ENGINE_ONLY = {"GS002", "GS003", "GS004"}  # special files, a crashing rule, the Python
# running gradsmith: tested in test_engine and test_newer_syntax


def test_codes_are_well_formed_grouped_and_registered_once():
    assert len(RULES) >= 30
    for code, rule in RULES.items():
        assert rule.code == code
        assert code[:3] in GROUPS
        assert rule.severity in ("error", "warning", "info")
        assert rule.summary and rule.why and rule.fix and rule.bad and rule.good
    names = [r.name for r in RULES.values()]
    assert len(names) == len(set(names))


def test_defining_a_code_twice_is_refused():
    with pytest.raises(ValueError, match="registered twice"):
        define(Rule("GS101", "x", "error", "s", "w", "f", "b", "g"))
    with pytest.raises(ValueError, match="GS123"):
        define(Rule("X1", "x", "error", "s", "w", "f", "b", "g"))


def test_every_code_is_documented():
    text = DOCS.read_text(encoding="utf-8")
    for code in RULES:
        assert f"### {code}" in text, code


def test_every_code_has_an_annotated_fixture(fixtures_dir, expected):
    annotated = {code for (_, _, code) in expected(fixtures_dir)}
    assert set(RULES) - ENGINE_ONLY - annotated == set()


RUNNABLE = sorted(c for c, r in RULES.items() if r.scope != "engine")


@pytest.mark.parametrize("code", RUNNABLE)
def test_bad_example_triggers_and_good_example_does_not(code):
    rule = RULES[code]
    bad = lint(source=rule.bad)
    assert code in {f.code for f in bad}
    marked = [i for i, line in enumerate(rule.bad.splitlines(), 1) if f"# {code}" in line]
    if marked:  # the documented example points at the offending line
        assert {f.line for f in bad if f.code == code} == set(marked)
    assert code not in {f.code for f in lint(source=rule.good)}
    assert not [f for f in lint(source=rule.good) if f.severity == "error"]


def test_missing_staticmethod_is_a_warning_that_does_not_claim_failure():
    """torch 2.13 calls forward/backward on the class: a plain `def` runs correctly."""
    src = (
        "import torch\n\n\nclass F(torch.autograd.Function):\n    @staticmethod\n"
        "    def forward(ctx, x):\n        return x.exp()\n\n"
        "    def backward(ctx, g):\n        return g\n"
    )
    (finding,) = [f for f in lint(source=src) if f.code == "GS113"]
    assert finding.severity == "warning"
    rule = RULES["GS113"]
    assert "fail" not in rule.why.lower() and "runs correctly" in rule.why
    assert RULES["GS117"].severity == "error"
