"""A module global the training script sets, None at import (issue 18, corpus 10b held-out,
spent: a gradient quantiser's backward reads ``global_args["rec_grads"]``, set by
``trainer.py`` as ``LUQ.global_args = args``).

Checked alone, backward met the import-time None and the row was a generic "'NoneType' object
is not subscriptable" (a skip, or a backward-error on a variant). Now it is ``unset-global``: the
verdict INCOMPLETE, the finding naming the global, the module, the key read, the line of the
project that sets it, and how to set it for the check; the advice, followed, gives a verdict,
PASS for a right backward and FAIL for a planted wrong one. A None the Function computes itself
stays a backward-error.
"""

from __future__ import annotations

import textwrap

import pytest

from gradsmith.checkrun.session import run_check
from gradsmith.discovery import Source

OPS = '''
import torch

settings = None  # set by train.py


class Halve(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 0.5

    @staticmethod
    def backward(ctx, g):
        if settings["record"]:
            print("recording", g.norm())
        return {grad}
'''
TRAIN = '''
import argparse

from shop import ops


def main():
    args = argparse.Namespace(record=False)
    ops.settings = vars(args)


if __name__ == "__main__":
    main()
'''
SET = '''
from shop import ops

ops.settings = {"record": False}
from shop.ops import Halve
'''


def _project(tmp_path, grad: str, wrapper: bool = False):
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "__init__.py").write_text("")
    (tmp_path / "shop" / "ops.py").write_text(textwrap.dedent(OPS.format(grad=grad)))
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN))
    if wrapper:  # the file the finding tells the user to write
        (tmp_path / "check_halve.py").write_text(textwrap.dedent(SET))


def _row(path) -> dict:
    result = run_check([Source("file", str(path), path.name, names=("Halve",))], isolate=False)
    return {row["name"].rsplit("::", 1)[-1]: row for row in result.rows}["Halve"]


def error_codes(row: dict) -> set[str]:
    return {f["code"] for f in row["report"]["findings"] if f["severity"] == "error"}


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    for name in ("shop", "shop.ops"):
        monkeypatch.delitem(__import__("sys").modules, name, raising=False)
    return tmp_path


def test_an_unset_global_is_named_with_where_the_project_sets_it(project):
    _project(project, "g * 0.5")
    row = _row(project / "shop" / "ops.py")
    assert row["verdict"] == "fail" and row.get("error") == "incomplete", row
    (found,) = [f for f in row["report"]["findings"] if f["code"] == "unset-global"]
    assert found["severity"] == "warning"
    assert found["details"]["global"] == "shop.ops.settings"
    assert found["details"]["reads"] == ['"record"']
    assert found["details"]["set_at"] == "train.py:9"
    assert "shop.ops.settings = {'record': ...}" in found["hint"]
    assert "backward-error" not in error_codes(row)


@pytest.mark.parametrize("grad, verdict", [("g * 0.5", "pass"), ("g * 0.4", "fail")],
                         ids=["right", "planted wrong"])
def test_set_as_the_finding_says_the_function_gets_a_verdict(project, grad, verdict):
    _project(project, grad, wrapper=True)
    row = _row(project / "check_halve.py")
    assert row["verdict"] == verdict, row
    assert "unset-global" not in {f["code"] for f in row["report"]["findings"]}
    if verdict == "fail":
        assert "gradient-mismatch" in error_codes(row)


def test_a_none_the_function_computes_stays_its_own_error(project):
    _project(project, "g * 0.5")
    ops = project / "shop" / "ops.py"
    ops.write_text(ops.read_text().replace('if settings["record"]:',
                                           'local = None\n        if local["record"]:'))
    row = _row(ops)
    assert "backward-error" in error_codes(row)
    assert "unset-global" not in {f["code"] for f in row["report"]["findings"]}
