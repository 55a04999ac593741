"""Odd but legal Python never crashes the linter, and correct Functions written in it get
no error (issue 19, robustness on unseen code). Each fixture under ``fixtures/odd_code`` is
also run: its gradients match autograd of the same expression. Files that are not valid
Python (bad encodings, null bytes, Python 2) are written here and get GS001/GS002 only."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

ODD = Path(__file__).parent / "fixtures" / "odd_code"
FILES = sorted(ODD.glob("*.py"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_odd_code_lints_without_crash_or_error(path):
    findings = lint(path, config=False)
    assert [f for f in findings if f.code == "GS003" or f.severity == "error"] == []


def _x(*shape):
    torch.manual_seed(0)
    return torch.randn(*shape, dtype=torch.float64, requires_grad=True)


def _same_grad(run, reference, *inputs):
    """run(*inputs) and reference(*inputs) give the same value and the same gradient."""
    got, want = run(*inputs), reference(*inputs)
    torch.testing.assert_close(got, want)
    g_got = torch.autograd.grad(got.sum(), inputs, allow_unused=True)
    g_want = torch.autograd.grad(want.sum(), inputs, allow_unused=True)
    for a, b in zip(g_got, g_want):
        torch.testing.assert_close(a, b)


def test_odd_code_functions_compute_autograd_gradients(load_fixture):
    mods = {p.stem: load_fixture(p, f"odd_code_{p.stem}") for p in FILES}
    x, w, y = _x(4), _x(4), _x(4)
    _same_grad(mods["decorators"].Cube.apply, lambda t: t ** 3, x)
    _same_grad(mods["nested_defs"].run, lambda t: 2 * t + t.sin() + 3 * t, x)
    _same_grad(mods["apply_aliases"].run,
               lambda a, b: a * a + a * a + a * b + a * a * a + a * b, x, w)
    ret = mods["returns"]
    _same_grad(ret.AsList.apply, lambda a, b: a + 2 * b, x, w)
    _same_grad(ret.FromGenerator.apply, lambda a, b, c: a + b + c, x, w, y)
    _same_grad(lambda t: ret.Starred.apply(t, 1, 2), lambda t: 3 * t, x)
    _same_grad(ret.Single.apply, torch.exp, x)
    mod = mods["modern_syntax"]
    _same_grad(mod.KeywordOnly.apply, lambda t: 2 * t, x)
    _same_grad(mod.Walrus.apply, torch.sigmoid, x)
    for mode, ref in (("double", lambda t: 2 * t), ("negate", torch.neg), ("id", lambda t: t)):
        _same_grad(lambda t, m=mode: mod.Matched.apply(t, m), ref, x)
    _same_grad(mod.PositionalOnly.apply, torch.mul, x, w)
    agen = mods["async_and_generators"]
    softplus = torch.nn.functional.softplus
    _same_grad(lambda t: asyncio.run(agen.run_async(t)), softplus, x)
    _same_grad(lambda t: torch.stack(list(agen.batches([t, t]))), lambda t: softplus(
        torch.stack([t, t])), x)
    _same_grad(mods["old_style"].Layer(), torch.tanh, x)
    dyn = mods["dynamic"]
    _same_grad(dyn.Squared.apply, lambda t: t * t, x)
    _same_grad(dyn.Halve.apply, lambda t: t / 2, x)
    _same_grad(dyn.Doubled.apply, lambda t: t * 2, x)
    _same_grad(vars(dyn)["Échelle"].apply, lambda t: t * 4, x)


_FUNCTION = ("import torch\n\n\nclass F{i}(torch.autograd.Function):\n    @staticmethod\n"
             "    def forward(ctx, x):\n        y = {expr}\n        ctx.save_for_backward(x)\n"
             "        return y\n\n    @staticmethod\n    def backward(ctx, g):\n"
             "        (x,) = ctx.saved_tensors\n        return g * {grad}\n")
#: name -> (bytes, the one finding code expected, or None for no error at all)
_ODD_FILES = {
    "null_byte.py": (b"import torch\nx = 1\x00\n", "GS001"),
    "latin1.py": (b"import torch\n# caf\xe9\n", "GS002"),
    "latin1_cookie.py": (b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + _FUNCTION.format(
        i=0, expr="x * 2", grad="2").encode(), None),
    "utf16.py": ("import torch\n".encode("utf-16"), "GS002"),
    "unknown_cookie.py": (b"# coding: klingon\nimport torch\n", "GS002"),
    "python2.py": (b"import torch\nprint 'hello'\n", "GS001"),
    "unterminated.py": (b"import torch\ns = '''never closed\n", "GS001"),
    # CPython compiles these; a recursive reader of the tree needs a deep stack
    "method_chain.py": (_FUNCTION.format(i=1, expr="x" + ".t()" * 1200, grad="1").encode(),
                        None),
    "long_sum.py": (_FUNCTION.format(i=2, expr=" + ".join(["x"] * 2500), grad="2500").encode(),
                    None),
    "long_line.py": (("X = [" + ", ".join(map(str, range(200_000))) + "]\n").encode(), None),
    "many_functions.py": ("".join(
        _FUNCTION.format(i=i, expr="x * 3", grad="3").replace("import torch\n", "")
        for i in range(300)).replace("\n\n\nclass F0", "import torch\n\n\nclass F0", 1).encode(),
        None),
}


def test_odd_files_give_parse_findings_or_nothing(tmp_path):
    for name, (data, _) in _ODD_FILES.items():
        (tmp_path / name).write_bytes(data)
    by_file: dict[str, list[str]] = {name: [] for name in _ODD_FILES}
    for f in lint(tmp_path, config=False):
        by_file[Path(f.path).name].append(f.code if f.severity == "error" or f.code == "GS003"
                                          else "")
    for name, (_, code) in _ODD_FILES.items():
        errors = [c for c in by_file[name] if c]
        assert errors == ([code] if code else []), name


def test_valid_odd_files_import_and_run(tmp_path, load_fixture):
    """The valid ones are valid: Python imports them, and their gradients are right."""
    for name in ("method_chain.py", "long_sum.py"):
        (tmp_path / name).write_bytes(_ODD_FILES[name][0])
    x = _x(3, 3)
    chain = load_fixture(tmp_path / "method_chain.py", "odd_method_chain")
    _same_grad(chain.F1.apply, lambda t: t, x)  # 1200 transposes: the identity
    total = load_fixture(tmp_path / "long_sum.py", "odd_long_sum")
    _same_grad(total.F2.apply, lambda t: 2500 * t, x)


def test_command_line_on_odd_files_exits_cleanly(tmp_path):
    for name, (data, _) in _ODD_FILES.items():
        (tmp_path / name).write_bytes(data)
    proc = subprocess.run([sys.executable, "-m", "gradsmith", "lint", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr  # the GS001/GS002 errors, nothing else
    assert "Traceback" not in proc.stderr and "GS003" not in proc.stdout


def test_rule_out_of_stack_runs_again_deep_without_duplicate_findings():
    """A checker that reports and then recurses past the default limit is run again on a
    deep stack: its findings appear once, and no GS003."""
    from gradsmith.linter import _engine

    def depth(n):
        return 0 if n == 0 else 1 + depth(n - 1)

    calls = []
    need = sys.getrecursionlimit() + 500  # past the default limit, well within the deep one

    def check(target, report):
        calls.append(target)
        report("GS302", "f.py", (1, 0), "first")
        assert depth(need) == need

    reporter = _engine.Reporter()
    _engine._guarded(check, "t", reporter, "GS302", "f.py", (1, 0))
    assert [f.code for f in reporter.findings] == ["GS302"] and len(calls) == 2
