"""Every requested target gets its own row (classes built by one factory share a
``__qualname__``), and listing a module is linear in its number of Functions."""

from __future__ import annotations

import textwrap

from gradsmith.cli import main
from gradsmith.discovery import list_candidates, resolve_targets

FACTORY = """
import torch
from torch.autograd import Function


def make(factor, claimed):
    class Scaled(Function):
        @staticmethod
        def forward(ctx, x):
            return x * factor

        @staticmethod
        def backward(ctx, g):
            return g * claimed

    return Scaled


Double = make(2.0, 2.0)
WrongTriple = make(3.0, 2.0)  # backward says 2, forward multiplies by 3
"""

WRAPPERS = """
import torch
from torch.autograd import Function


def wrap_class(fn, dfn):
    class NumpyOpWrapper(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return fn(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * dfn(x)

    return NumpyOpWrapper


Sin = wrap_class(torch.sin, torch.cos)
Exp = wrap_class(torch.exp, lambda x: 2 * torch.exp(x))  # wrong: 2 e^x for e^x
"""


def _run(tmp_path, capsys, monkeypatch, source: str, *targets: str) -> tuple[int, str]:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "f.py").write_text(textwrap.dedent(source))
    code = main(["check", *targets, "--no-isolate", "--no-compat"])
    return code, capsys.readouterr().out


def _row(out: str, name: str) -> str:
    return next(line for line in out.splitlines() if f"f.py::{name} " in line + " ")


def test_classes_from_one_factory_named_on_the_command_line_each_get_a_row(
        tmp_path, capsys, monkeypatch):
    code, out = _run(tmp_path, capsys, monkeypatch, FACTORY, "f.py::Double",
                     "f.py::WrongTriple")
    assert code == 1
    assert "PASS" in _row(out, "Double") and "FAIL" in _row(out, "WrongTriple")
    assert "1 passed, 1 failed" in out


def test_two_wrappers_from_one_factory_are_both_listed_and_checked(tmp_path, capsys,
                                                                    monkeypatch):
    code, out = _run(tmp_path, capsys, monkeypatch, WRAPPERS, "f.py")
    assert code == 1
    assert "PASS" in _row(out, "Sin") and "FAIL" in _row(out, "Exp")
    assert "1 passed, 1 failed" in out


def test_the_same_object_under_two_names_is_checked_once(tmp_path, capsys, monkeypatch):
    aliased = FACTORY.replace("WrongTriple = make(3.0, 2.0)", "Twice = Double")
    code, out = _run(tmp_path, capsys, monkeypatch, aliased, "f.py::Double", "f.py::Twice")
    assert code == 0 and "1 passed, 0 failed" in out


def _module(n: int) -> str:
    parts = ["import torch\nfrom torch.autograd import Function\n"]
    for i in range(n):
        parts.append(f"\n\nclass F{i}(Function):\n    @staticmethod\n    def forward(ctx, x):\n"
                     f"        return x * {i + 1}\n\n    @staticmethod\n"
                     f"    def backward(ctx, g):\n        return g * {i + 1}\n")
    return "".join(parts)


def test_a_module_of_300_functions_lists_every_one_at_its_line(tmp_path):
    text = _module(300)
    path = tmp_path / "many.py"
    path.write_text(text)
    lines = text.splitlines()
    want = {f"F{i}": lines.index(f"class F{i}(Function):") + 1 for i in range(300)}
    (source,) = resolve_targets([str(path)])
    listing = list_candidates(source)
    assert {c.ref.attr: c.line for c in listing.candidates} == want
    assert len({c.key for c in listing.candidates}) == 300


def test_a_module_of_300_functions_is_listed_within_the_time_limit(tmp_path, capsys,
                                                                     monkeypatch):
    # Isolated, as users run it: listing used to take n^2 time and exceed the limit
    # ("import timed out"); -k keeps the checking itself to one Function.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "many.py").write_text(_module(300))
    code = main(["check", "many.py", "-k", "F299", "--no-compat", "--jobs", "1",
                 "--timeout", "30", "--startup-timeout", "300"])
    out = capsys.readouterr().out
    assert "timed out" not in out and "import error" not in out, out
    assert code == 0 and "many.py::F299" in out and "1 passed, 0 failed" in out
