"""A file in a folder without ``__init__.py`` (a namespace package) that imports relative to its
package is imported as that package's member (corpus 9b dev: PSA-Compress's
``models/psa_modules/lerp_psa.py`` does ``from .psa import psa_func`` and was reported
"attempted relative import with no known parent package"). Reduced cases written here; a wrong
backward in the imported file still fails.
"""

from __future__ import annotations

import sys

import pytest
from source_cases import assert_clip_checked, write

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


@pytest.mark.parametrize("factor", ["1", "2"])
def test_a_file_in_a_namespace_folder_imports_its_siblings(
        tmp_path, capsys, monkeypatch, factor):
    ops = tmp_path / "proj-x" / "models" / "ops"
    write(ops / "limits.py", "LIMIT = 1.0\n")
    write(ops / "masks.py", INSIDE.replace("IMPORT", ".limits import LIMIT"))
    path = write(ops / "clip.py", CLIP.replace("IMPORT", ".masks import inside")
                  .replace("LIMIT", "1").replace("FACTOR", factor))
    assert_clip_checked(tmp_path, capsys, monkeypatch, path, factor)
    # `proj-x` is no Python name: nothing can be the parent `..` asks for; Python's error stays
    above = write(tmp_path / "proj-x" / "above.py", "from ..limits import LIMIT\n")
    with pytest.raises(TargetImportError, match="relative import"):
        load_module("file", above)
    # a sibling failing as a package member leaves the file's own fallback, imported alone
    write(ops / "broken.py", "raise RuntimeError('needs a GPU')\n")
    guarded = write(ops / "guarded.py", """
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
    write(tmp_path / "installed" / "models.py", "raise RuntimeError('the wrong models')\n")
    monkeypatch.syspath_prepend(str(tmp_path / "installed"))
    models = tmp_path / "proj-x" / "models"
    write(models / "limits.py", "LIMIT = 1.0\n")
    write(models / "ops" / "masks.py", INSIDE.replace("IMPORT", "..limits import LIMIT"))
    path = write(models / "ops" / "clip.py", CLIP.replace("IMPORT", ".masks import inside")
                  .replace("LIMIT", "1").replace("FACTOR", factor))
    assert_clip_checked(tmp_path, capsys, monkeypatch, path, factor)


@pytest.mark.parametrize("factor", ["1", "2"])
def test_a_package_inside_a_namespace_folder_reaches_its_parent(
        tmp_path, capsys, monkeypatch, factor):
    models = tmp_path / "proj-x" / "models"
    write(models / "limits.py", "LIMIT = 1.0\n")
    write(models / "ops" / "__init__.py", "")
    path = write(models / "ops" / "clip.py", CLIP.replace("IMPORT", "..limits import LIMIT")
                  .replace("inside(x)", "((x >= -LIMIT) & (x <= LIMIT)).to(x.dtype)")
                  .replace("LIMIT, LIMIT", "1, 1").replace("FACTOR", factor))
    assert_clip_checked(tmp_path, capsys, monkeypatch, path, factor)
