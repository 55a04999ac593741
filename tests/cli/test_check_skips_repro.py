"""``gradsmith check .`` does not collect the scripts its own ``--repro`` wrote (issue 21: each
ran at import and became a ``FAIL (import error) SystemExit`` row, exit 2)."""

from __future__ import annotations

import json


def test_check_dot_after_repro_checks_the_users_code_only(write, snippets, gradsmith_cli,
                                                          tmp_path):
    write("ops.py", snippets.bad)
    code, _, _ = gradsmith_cli(".", "--no-isolate", "--no-compat", "--repro", "repro")
    scripts = sorted((tmp_path / "repro").glob("*.py"))
    assert code == 1 and scripts
    # One written before the scripts had their marker line: known by its docstring.
    (tmp_path / "repro" / "old.py").write_text(
        '"""Reproduce a gradsmith finding with plain PyTorch (this script never imports '
        'gradsmith).\n"""\nraise SystemExit(0)\n')
    code, out, _ = gradsmith_cli(".", "--no-isolate", "--no-compat", "--format", "json")
    rows = json.loads(out)["results"]
    assert [r["name"] for r in rows] == ["ops.py::BadMatmul"]
    assert code == 1  # the user's bug; no import-error rows (exit 2)


def test_naming_a_repro_script_says_how_to_run_it(write, snippets, gradsmith_cli, tmp_path):
    write("ops.py", snippets.bad)
    gradsmith_cli("ops.py", "--no-isolate", "--no-compat", "--repro", "repro")
    script = sorted((tmp_path / "repro").glob("*.py"))[0]
    code, out, err = gradsmith_cli(f"repro/{script.name}", "--no-isolate")
    assert code == 2 and out == ""
    assert "repro script" in err and f"python repro/{script.name}" in err
