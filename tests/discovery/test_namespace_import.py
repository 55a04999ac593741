"""A file in a folder without ``__init__.py`` (a namespace package) that imports relative to its
package is imported as that package's member (corpus 9b dev: PSA-Compress's
``models/psa_modules/lerp_psa.py`` does ``from .psa import psa_func`` and was reported
"attempted relative import with no known parent package"). Reduced cases written here; a wrong
backward in the imported file still fails.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
import torch

from gradsmith.cli import main
from gradsmith.discovery.collect import TargetImportError, load_module

CLIP = """
    import torch

    from IMPORT


    class Clip(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.clamp(-LIMIT, LIMIT)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * inside(x) * FACTOR
"""
INSIDE = """
    from IMPORT


    def inside(x):
        return ((x >= -LIMIT) & (x <= LIMIT)).to(x.dtype)
"""


@pytest.fixture(autouse=True)
def _forget(monkeypatch):
    """Each test's packages share names (``models``, ``ops``): drop them from the import cache."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.split(".")[0] in {"models", "ops"}:
            del sys.modules[name]


def _write(path: Path, source: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source))
    return str(path)


def _assert_checked(tmp_path, capsys, monkeypatch, path: str, factor: str) -> None:
    # the reference: autograd of clamp agrees with the right backward
    module = load_module("file", path)
    x = torch.tensor([-2.0, -0.5, 0.5, 2.0], dtype=torch.float64, requires_grad=True)
    (got,) = torch.autograd.grad(module.Clip.apply(x).sum(), x)
    y = x.detach().clone().requires_grad_()
    (want,) = torch.autograd.grad(y.clamp(-1, 1).sum(), y)
    torch.testing.assert_close(got, want * float(factor))
    monkeypatch.chdir(tmp_path)
    code = main(["check", f"{path}::Clip", "--no-isolate", "--no-compat"])
    out = capsys.readouterr().out
    assert "import failed" not in out
    assert (code == 0) is (factor == "1")
    assert ("1 passed" in out) is (factor == "1")
    if factor != "1":
        assert "gradient-mismatch" in out


@pytest.mark.parametrize("factor", ["1", "2"])
def test_a_file_in_a_namespace_folder_imports_its_siblings(
        tmp_path, capsys, monkeypatch, factor):
    ops = tmp_path / "proj-x" / "models" / "ops"
    _write(ops / "limits.py", "LIMIT = 1.0\n")
    _write(ops / "masks.py", INSIDE.replace("IMPORT", ".limits import LIMIT"))
    path = _write(ops / "clip.py", CLIP.replace("IMPORT", ".masks import inside")
                  .replace("LIMIT", "1").replace("FACTOR", factor))
    _assert_checked(tmp_path, capsys, monkeypatch, path, factor)
    # `proj-x` is no Python name: nothing can be the parent `..` asks for; Python's error stays
    above = _write(tmp_path / "proj-x" / "above.py", "from ..limits import LIMIT\n")
    with pytest.raises(TargetImportError, match="relative import"):
        load_module("file", above)
    # a sibling failing as a package member leaves the file's own fallback, imported alone
    _write(ops / "broken.py", "raise RuntimeError('needs a GPU')\n")
    guarded = _write(ops / "guarded.py", """
        try:
            from .broken import LIMIT
        except ImportError:
            LIMIT = 1.0
    """)
    assert load_module("file", guarded).LIMIT == 1.0


@pytest.mark.parametrize("factor", ["1", "2"])
def test_a_sibling_reaching_two_parents_up_moves_the_root_up(
        tmp_path, capsys, monkeypatch, factor):
    # clip.py climbs one parent, the sibling it imports climbs two (`from ..limits import`);
    # a module named like the folder elsewhere on sys.path would win over a namespace folder
    _write(tmp_path / "installed" / "models.py", "raise RuntimeError('the wrong models')\n")
    monkeypatch.syspath_prepend(str(tmp_path / "installed"))
    models = tmp_path / "proj-x" / "models"
    _write(models / "limits.py", "LIMIT = 1.0\n")
    _write(models / "ops" / "masks.py", INSIDE.replace("IMPORT", "..limits import LIMIT"))
    path = _write(models / "ops" / "clip.py", CLIP.replace("IMPORT", ".masks import inside")
                  .replace("LIMIT", "1").replace("FACTOR", factor))
    _assert_checked(tmp_path, capsys, monkeypatch, path, factor)


@pytest.mark.parametrize("factor", ["1", "2"])
def test_a_package_inside_a_namespace_folder_reaches_its_parent(
        tmp_path, capsys, monkeypatch, factor):
    models = tmp_path / "proj-x" / "models"
    _write(models / "limits.py", "LIMIT = 1.0\n")
    _write(models / "ops" / "__init__.py", "")
    path = _write(models / "ops" / "clip.py", CLIP.replace("IMPORT", "..limits import LIMIT")
                  .replace("inside(x)", "((x >= -LIMIT) & (x <= LIMIT)).to(x.dtype)")
                  .replace("LIMIT, LIMIT", "1, 1").replace("FACTOR", factor))
    _assert_checked(tmp_path, capsys, monkeypatch, path, factor)
