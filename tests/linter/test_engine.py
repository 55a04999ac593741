"""Robustness and filtering: parse/decode/internal errors, noqa, select/ignore, config."""

from __future__ import annotations

import textwrap

import pytest

from gradsmith import GradsmithError
from gradsmith.linter import _registry, lint

INPLACE = textwrap.dedent("""
    import torch

    class Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad_output):
            grad_output *= 2{noqa}
            return grad_output.data
""")


def test_syntax_error_is_a_finding_not_a_crash():
    (f,) = lint(source="def f(:\n    pass\n")
    assert (f.code, f.line, f.severity) == ("GS001", 1, "error")


def test_undecodable_file_is_a_finding(tmp_path):
    path = tmp_path / "latin.py"
    path.write_bytes(b"x = '\xff\xfe'\n")
    (f,) = lint(path, config=False)
    assert (f.code, f.path) == ("GS002", str(path))


def test_coding_cookie_is_honoured(tmp_path):
    path = tmp_path / "latin.py"
    path.write_bytes(b"# -*- coding: latin-1 -*-\nx = '\xff'\n")
    assert lint(path, config=False) == []


def test_crashing_rule_becomes_internal_error_finding(monkeypatch):
    def broken(facts, report):
        raise RuntimeError("boom")

    rule = _registry.RULES["GS101"]
    monkeypatch.setattr(_registry, "CHECKERS", {
        "function": [(rule, broken), *_registry.CHECKERS["function"]],
        "module": _registry.CHECKERS["module"],
    })
    from gradsmith.linter import _engine
    monkeypatch.setattr(_engine, "CHECKERS", _registry.CHECKERS)
    findings = lint(source=INPLACE.format(noqa=""))
    internal = [f for f in findings if f.code == "GS003"]
    assert len(internal) == 1 and "boom" in internal[0].message
    assert "GS102" in {f.code for f in findings}  # the other rules still ran


@pytest.mark.parametrize(("noqa", "codes"), [
    ("", {"GS102", "GS201"}),
    ("  # noqa", {"GS201"}),
    ("  # noqa: GS102", {"GS201"}),
    ("  # noqa: GS1", {"GS201"}),
    ("  # noqa: GS201", {"GS102", "GS201"}),
])
def test_noqa(noqa, codes):
    assert {f.code for f in lint(source=INPLACE.format(noqa=noqa))} == codes


@pytest.mark.parametrize(("select", "ignore", "codes"), [
    (None, None, {"GS102", "GS201"}),
    (["GS1"], None, {"GS102"}),
    ("GS2", None, {"GS201"}),
    (None, "GS102", {"GS201"}),
    (["GS"], ["GS2"], {"GS102"}),
    (["GS201"], ["GS2"], {"GS201"}),  # the longer prefix wins
])
def test_select_and_ignore(select, ignore, codes):
    found = lint(source=INPLACE.format(noqa=""), select=select, ignore=ignore)
    assert {f.code for f in found} == codes


def test_unknown_codes_are_usage_errors():
    with pytest.raises(GradsmithError, match="select got 'GS999'"):
        lint(source="x = 1\n", select=["GS999"])
    with pytest.raises(GradsmithError, match="ignore got 'E501'"):
        lint(source="x = 1\n", ignore="E501")


def test_missing_path_and_missing_target_are_usage_errors(tmp_path):
    with pytest.raises(GradsmithError, match="does not exist"):
        lint(tmp_path / "nope.py")
    with pytest.raises(GradsmithError, match="nothing to lint"):
        lint()
    with pytest.raises(GradsmithError, match="both paths and source"):
        lint(tmp_path, source="x = 1\n")


def _project(tmp_path, table: str):
    (tmp_path / "pyproject.toml").write_text(f"[tool.gradsmith.lint]\n{table}\n")
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "ops.py").write_text(INPLACE.format(noqa=""))
    (pkg / "skip_me.py").write_text(INPLACE.format(noqa=""))
    return pkg


def test_pyproject_config_is_found_and_applied(tmp_path):
    pkg = _project(tmp_path, 'ignore = ["GS2"]\nexclude = ["skip_me.py"]')
    found = lint(pkg)
    assert {(f.code, f.path.endswith("ops.py")) for f in found} == {("GS102", True)}
    assert {f.code for f in lint(pkg, config=False)} == {"GS102", "GS201"}
    assert {f.code for f in lint(pkg, ignore=[])} == {"GS102", "GS201"}  # arguments win


def test_per_file_ignores(tmp_path):
    pkg = _project(tmp_path, '[tool.gradsmith.lint.per-file-ignores]\n"*skip_me.py" = ["GS1"]')
    found = {(f.path.rsplit("/", 1)[-1], f.code) for f in lint(pkg)}
    assert ("skip_me.py", "GS102") not in found and ("ops.py", "GS102") in found


def test_bad_config_is_reported_with_the_fix(tmp_path):
    pkg = _project(tmp_path, 'selct = ["GS1"]')
    with pytest.raises(GradsmithError, match="unknown key.*selct"):
        lint(pkg)
    with pytest.raises(GradsmithError, match="does not exist"):
        lint(pkg, config=tmp_path / "missing.toml")
    (tmp_path / "pyproject.toml").write_text('[tool.gradsmith.lint]\nignore = "GS1" "x"\n')
    with pytest.raises(GradsmithError, match="cannot read"):
        lint(pkg)


def test_path_and_source_give_the_same_findings(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(INPLACE.format(noqa=""))
    by_path = [(f.line, f.col, f.code, f.message) for f in lint(path, config=False)]
    by_source = [(f.line, f.col, f.code, f.message) for f in lint(source=path.read_text())]
    assert by_path == by_source


def test_columns_count_characters_not_bytes():
    src = INPLACE.format(noqa="").replace("return x * 2", "é = 'ü'; return x.data * 2")
    (f,) = [f for f in lint(source=src) if f.line == 7]
    line = src.splitlines()[6]
    assert line[f.col - 1:].startswith("x.data")


def test_same_module_name_in_two_folders_is_not_guessed(tmp_path):
    """Two unrelated `utils.py`: `from utils import Base` must not pick the Function one."""
    for sub, body in (("a", "from torch.autograd import Function\n\n\nclass Base(Function):\n"
                            "    pass\n"), ("b", "class Base:\n    pass\n")):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "utils.py").write_text(body)
    (tmp_path / "b" / "main.py").write_text(
        "from utils import Base\n\n\nclass Thing(Base):\n    def forward(self, x):\n"
        "        x.add_(1)\n        return x\n\n\nt = Thing(1)\n"
    )
    assert lint(tmp_path, config=False) == []
    (tmp_path / "a" / "utils.py").rename(tmp_path / "a" / "fn_base.py")
    (tmp_path / "b" / "main.py").write_text(
        (tmp_path / "b" / "main.py").read_text().replace("from utils", "from fn_base"))
    assert {f.code for f in lint(tmp_path, config=False)} == {"GS111", "GS113", "GS206", "GS212"}  # no backward: no GS101


def test_deeply_nested_expressions_do_not_crash_rules():
    expr = " + ".join(["x"] * 900)
    src = ("import torch\n\n\nclass F(torch.autograd.Function):\n    @staticmethod\n"
           f"    def forward(ctx, x):\n        return {expr}\n\n    @staticmethod\n"
           "    def backward(ctx, g):\n        return g * 900\n")
    assert [f.code for f in lint(source=src) if f.code.startswith("GS0")] == []
