"""What a module does at import must not turn a checkable Function into an import error, and
an import that cannot work says why and what to do (issue 18, corpus 8b held-out: AdaBits reads
a configuration path from ``sys.argv`` at import, QSD's second ``Quant`` sits in a package whose
``__init__`` needs an uninstalled library, VeGVN's file has no imports). Reduced cases written
here; a wrong backward in each checked module still fails.
"""

from __future__ import annotations

import sys
import textwrap

import pytest
import torch

from gradsmith.cli import main
from gradsmith.discovery.collect import TargetImportError, load_module

SCALE = """
    import argparse
    import torch

    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=float, default=2.0)
    args = parser.parse_args()


    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * args.scale

        @staticmethod
        def backward(ctx, g):
            return g * FACTOR
"""


def _write(path, source: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source))
    return str(path)


def _check(tmp_path, capsys, monkeypatch, target: str) -> tuple[int, str]:
    monkeypatch.chdir(tmp_path)
    code = main(["check", target, "--no-isolate", "--no-compat"])
    return code, capsys.readouterr().out


@pytest.mark.parametrize("factor, passes", [("args.scale", True), ("3.0", False)])
def test_a_module_parsing_its_command_line_at_import_is_checked(
        tmp_path, capsys, monkeypatch, factor, passes):
    monkeypatch.setattr("sys.argv", ["pytest", "-q", "--unknown-to-the-module"])
    path = _write(tmp_path / "scaled.py", SCALE.replace("FACTOR", factor))
    module = load_module("file", path)  # argparse saw no arguments: its defaults
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    (got,) = torch.autograd.grad(module.Scale.apply(x).sum(), x)
    torch.testing.assert_close(got, torch.full_like(x, 2.0 if passes else 3.0))
    code, out = _check(tmp_path, capsys, monkeypatch, f"{path}::Scale")
    assert "import failed" not in out
    assert (code == 0) is passes
    assert ("1 passed" in out) is passes
    if not passes:
        assert "gradient-mismatch" in out
    assert sys.argv == ["pytest", "-q", "--unknown-to-the-module"]  # restored


INIT = "import not_installed_anywhere_xyz\n"
QUANT = """
    import torch


    class Clip(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.clamp(-1, 1)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * ((x >= -1) & (x <= 1)).to(g.dtype) * FACTOR
"""


# The package's name is its own: a `pkg` another test left in sys.modules would shadow it.
@pytest.mark.parametrize("factor, passes", [("1", True), ("2", False)])
def test_a_file_whose_package_init_fails_is_imported_alone(
        tmp_path, capsys, monkeypatch, factor, passes):
    _write(tmp_path / "initfails_pkg" / "__init__.py", INIT)
    path = _write(tmp_path / "initfails_pkg" / "ops" / "clip.py", QUANT.replace("FACTOR", factor))
    _write(tmp_path / "initfails_pkg" / "ops" / "__init__.py", "")
    monkeypatch.syspath_prepend(str(tmp_path / "elsewhere"))
    code, out = _check(tmp_path, capsys, monkeypatch, f"{path}::Clip")
    assert "import failed" not in out
    assert (code == 0) is passes
    if not passes:
        assert "gradient-mismatch" in out
    # the reference: autograd of clamp agrees with the right backward
    module = load_module("file", path)
    x = torch.tensor([-2.0, -0.5, 0.5, 2.0], dtype=torch.float64, requires_grad=True)
    (got,) = torch.autograd.grad(module.Clip.apply(x).sum(), x)
    y = x.detach().clone().requires_grad_()
    (want,) = torch.autograd.grad(y.clamp(-1, 1).sum(), y)
    torch.testing.assert_close(got, want * float(factor))
    # a file importing relative to its package needs the package: its error stays
    relative = _write(tmp_path / "initfails_pkg" / "ops" / "rel.py", "from . import clip\n")
    with pytest.raises(TargetImportError, match="not_installed_anywhere_xyz"):
        load_module("file", relative)


def _message(tmp_path, name: str, source: str) -> str:
    path = _write(tmp_path / name, source)
    with pytest.raises(TargetImportError) as info:
        load_module("file", path)
    return str(info.value)


def test_a_name_the_module_never_imports_says_which_import_to_add(tmp_path):
    message = _message(tmp_path, "rev.py", """
        class Reverse(Function):
            @staticmethod
            def forward(ctx, x):
                return x.view_as(x)
    """)
    assert message.startswith("NameError: name 'Function' is not defined")
    assert "rev.py:2 uses `Function` but the module never imports or defines it" in message
    assert "Fix: add `from torch.autograd import Function` at the top of rev.py" in message


def test_a_module_that_is_not_installed_is_named(tmp_path):
    message = _message(tmp_path, "m.py", "import torch\nimport not_installed_anywhere_xyz\n")
    assert "the module `not_installed_anywhere_xyz` is not installed" in message
    assert "Fix: install the package that provides" in message


def test_the_projects_own_package_off_the_path_is_named(tmp_path):
    _write(tmp_path / "proj" / "helpers_xyz" / "__init__.py", "")
    message = _message(tmp_path / "proj" / "models", "m.py", "import helpers_xyz\n")
    assert f"`helpers_xyz` is the project's own, in {tmp_path / 'proj'}" in message


def test_a_configuration_read_from_the_command_line_at_import_is_named(tmp_path):
    _write(tmp_path / "config_xyz.py", """
        import os
        import sys

        path = ""
        for arg in sys.argv:
            if arg.startswith("app:"):
                path = arg[4:]
        assert os.path.exists(path), "File {} not exist.".format(path)
    """)
    message = _message(tmp_path, "ops.py", "import config_xyz\n")
    assert message.startswith("AssertionError: File  not exist.")
    assert "config_xyz.py:6 `for arg in sys.argv:` reads the command line" in message
    assert "no arguments and an empty standard input" in message


def test_a_required_command_line_option_is_named_not_blamed_on_python(tmp_path):
    message = _message(tmp_path, "train.py", """
        import argparse

        parser = argparse.ArgumentParser()
        parser.add_argument("--config", required=True)
        args = parser.parse_args()
    """)
    assert message.startswith("SystemExit: 2")
    assert "train.py:6 `args = parser.parse_args()` reads the command line" in message
    assert "cannot be imported on this Python" not in message
