"""A file whose folder holds a module of the folder's own name is imported the way its project
imports it, as a dotted module from the root (corpus 11b dev: BIMRL's
``brim_core/sparse_grad_attn.py`` does ``from brim_core.sparse_attn import ...`` next to
``brim_core/brim_core.py``; importing the file alone put ``brim_core/`` first on ``sys.path``,
where ``brim_core`` is that module, and the import failed with "'brim_core' is not a
package"). Reduced cases written here; a wrong backward in the imported file still fails.
"""

from __future__ import annotations

import sys

import pytest
from source_cases import assert_clip_checked, write

from gradsmith.discovery.collect import load_module

CLIP = """
    import torch

    from core.masks import inside


    class Clip(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.clamp(-1, 1)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * inside(x) * FACTOR
"""


@pytest.fixture(autouse=True)
def _forget(monkeypatch):
    """The tests' packages share the name ``core``: drop it from the import cache after each."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.split(".")[0] == "core":
            del sys.modules[name]


def _project(tmp_path, factor: str) -> str:
    core = tmp_path / "proj" / "core"  # a namespace folder: no __init__.py, as in the project
    write(core / "core.py", "from core.clip import Clip\n\nMODEL = Clip\n")  # the shadow
    write(core / "masks.py", """
        def inside(x):
            return ((x >= -1) & (x <= 1)).to(x.dtype)
    """)
    return write(core / "clip.py", CLIP.replace("FACTOR", factor))


@pytest.mark.parametrize("factor", ["1", "2"])
def test_a_file_next_to_a_module_of_its_folders_name_imports_as_the_project_does(
        tmp_path, capsys, monkeypatch, factor):
    path = _project(tmp_path, factor)
    module = load_module("file", path)
    assert module.__name__ == "core.clip"  # dotted from the project's root
    assert_clip_checked(tmp_path, capsys, monkeypatch, path, factor)


def test_the_shadowing_module_itself_imports_too(tmp_path):
    _project(tmp_path, "1")
    module = load_module("file", str(tmp_path / "proj" / "core" / "core.py"))
    assert module.MODEL.__name__ == "Clip"


def test_a_file_without_the_shadow_is_imported_alone_as_before(tmp_path):
    path = write(tmp_path / "lone" / "clip.py", CLIP.replace("from core.masks import inside",
                                                             "from masks import inside")
                 .replace("FACTOR", "1"))
    write(tmp_path / "lone" / "masks.py", "def inside(x):\n    return (x.abs() <= 1).to(x.dtype)\n")
    assert load_module("file", path).__name__.startswith("gradsmith_target_clip_")


def test_a_checkout_named_like_its_package_keeps_the_package(tmp_path):
    # foo/ (the checkout, no __init__) holds the package foo/foo/ and a script importing it:
    # the folder first on sys.path finds the real package, as before
    checkout = tmp_path / "core"
    write(checkout / "core" / "__init__.py", "")
    write(checkout / "core" / "masks.py", "def inside(x):\n    return (x.abs() <= 1).to(x.dtype)\n")
    write(checkout / "core.py", "")  # even beside a module of the same name: the package wins
    path = write(checkout / "clip.py", CLIP.replace("FACTOR", "1"))
    module = load_module("file", path)
    assert module.inside.__module__ == "core.masks"
    assert module.__name__.startswith("gradsmith_target_clip_")
