"""Every finding code is registered, used, documented, and in kebab case; docs/check.md's table of
codes is generated from the package's (issue 21)."""

import re
from pathlib import Path

from gradsmith.checker.code_docs import lookup, replace_table
from gradsmith.checker.codes import CODES, COMMAND_ROWS
from gradsmith.checker.report import SEVERITIES

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "src" / "gradsmith" / "checker"
# A code literal is the first argument of Finding(...) or the code in a findings helper.
LITERAL = re.compile(r'"([a-z0-9]+(?:-[a-z0-9]+)+)",\s*"(error|warning|info)"')


def _used_codes() -> set[str]:
    text = "\n".join(p.read_text() for p in SOURCE.rglob("*.py") if p.name != "codes.py")
    used = {m.group(1) for m in LITERAL.finditer(text)}
    used |= set(re.findall(r'Finding\(\s*"([a-z0-9-]+)"', text))
    hyphenated = r'"([a-z0-9]+(?:-[a-z0-9]+)+)"'
    used |= set(re.findall(hyphenated + r" if kind", text))
    used |= set(re.findall(r"if kind[^\n]*? else " + hyphenated, text))
    return used - set(SEVERITIES)


def test_every_code_used_in_source_is_registered():
    assert _used_codes() - set(CODES) == set()


def test_every_registered_code_is_used_and_well_formed():
    assert set(CODES) - _used_codes() == set()
    for code, (severity, _check) in CODES.items():
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", code) or code == "kink", code
        assert severity in SEVERITIES


def test_every_code_is_documented():
    docs = (ROOT / "docs" / "check.md").read_text()
    missing = [code for code in CODES if f"| `{code}` |" not in docs]
    assert missing == []


def test_the_docs_table_is_the_packages():
    docs = (ROOT / "docs" / "check.md").read_text(encoding="utf-8")
    assert replace_table(docs) == docs, (
        "docs/check.md's finding codes are stale: run "
        "`python -m gradsmith.checker.code_docs docs/check.md`")


def test_every_code_gradsmith_reports_can_be_explained():
    """The checker's codes and those the command adds (``"code": "..."`` in checkrun/, cli/ and
    the run policy, _check_policy.py) have a cause and a fix in the package. Not codes, so not
    listed: a row's ``error`` (``import``, ``exception``, ``crash``, ``timeout``), which SARIF
    also uses as a rule id."""
    text = "\n".join([*(p.read_text() for d in ("checkrun", "cli")
                         for p in (SOURCE.parent / d).rglob("*.py")),
                       (SOURCE.parent / "_check_policy.py").read_text()])
    command = set(re.findall(r'"code":\s*"([a-z0-9-]+)"', text))
    from gradsmith._check_policy import COMMAND_CODES

    assert command == set(COMMAND_CODES) == set(COMMAND_ROWS)
    missing = [code for code in _used_codes() | command
               if lookup(code) is None or not (lookup(code).cause and lookup(code).fix)]
    assert missing == []
