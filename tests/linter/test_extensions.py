"""GS215 on compiled extensions: what the project's setup.py builds, compiled files, and the
harm (second derivatives silently missing a term) shown with a stand-in for the extension."""

from __future__ import annotations

import importlib
import sys
import types

import pytest
import torch

from gradsmith.linter import lint

_SETUP = (
    "from setuptools import setup\nfrom torch.utils.cpp_extension import CppExtension\n\n"
    "setup(name='proj', ext_modules=[CppExtension('proj.SCN', ['scn.cpp'])])\n"
)
_FNS = (
    "import torch\nfrom torch.autograd.function import once_differentiable\n\n"
    "from . import SCN\n\n\n"
    "class Square(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
    "        ctx.save_for_backward(x)\n        return x * x\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        (x,) = ctx.saved_tensors\n"
    "        return SCN.square_backward(x, g)\n\n\n"
    "class SquareOnce(Square):\n    @staticmethod\n    @once_differentiable\n"
    "    def backward(ctx, g):\n        (x,) = ctx.saved_tensors\n"
    "        return SCN.square_backward(x, g)\n"
)


def _project(root, setup: str | None = _SETUP, files: dict[str, str] | None = None):
    (root / "proj").mkdir()
    (root / "proj" / "__init__.py").write_text("")
    (root / "proj" / "fns.py").write_text(_FNS)
    if setup is not None:
        (root / "setup.py").write_text(setup)
    for name, text in (files or {}).items():
        (root / "proj" / name).write_text(text)
    return root / "proj" / "fns.py"


def _gs215(path) -> list[int]:
    return [f.line for f in lint(path, config=False) if f.code == "GS215"]


def _line(text: str) -> int:
    return text.splitlines().index("        return SCN.square_backward(x, g)") + 1


def test_extension_of_setup_py_runs_opaque_kernel_and_double_backward_is_silently_wrong(
    tmp_path, monkeypatch
):
    fns = _project(tmp_path)
    assert _gs215(fns) == [_line(_FNS)]  # Square; SquareOnce is @once_differentiable

    def square_backward(x, g):  # what a compiled kernel does: no autograd graph
        return torch.from_numpy(2 * x.detach().numpy() * g.detach().numpy())

    scn = types.ModuleType("proj.SCN")
    scn.square_backward = square_backward
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(sys.modules, "proj.SCN", scn)
    for name in ("proj", "proj.fns"):  # removed again when the test ends
        monkeypatch.setitem(sys.modules, name, None)
        monkeypatch.delitem(sys.modules, name)
    mod = importlib.import_module("proj.fns")
    x = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad((mod.Square.apply(x) ** 2).sum(), x, create_graph=True)
    (ref,) = torch.autograd.grad(((x * x) ** 2).sum(), x, create_graph=True)
    torch.testing.assert_close(g, ref.detach())  # first derivative right: 4 x^3
    assert g.grad_fn is None  # no graph: the second derivative has nothing to follow
    ((g ** 2).sum() + (x ** 2).sum()).backward()  # a gradient penalty next to another term
    (ref2,) = torch.autograd.grad((ref ** 2).sum() + (x ** 2).sum(), x)
    torch.testing.assert_close(ref2, 96 * x.detach() ** 5 + 2 * x.detach())  # by hand
    torch.testing.assert_close(x.grad, 2 * x.detach())  # the penalty's term silently lost
    (g,) = torch.autograd.grad((mod.SquareOnce.apply(x) ** 2).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        ((g ** 2).sum() + (x ** 2).sum()).backward()  # the fix: it raises instead

def test_a_python_module_of_the_same_name_is_not_an_extension(tmp_path):
    fns = _project(tmp_path)
    assert _gs215(fns) == [_line(_FNS)]
    (tmp_path / "proj" / "SCN.py").write_text("def square_backward(x, g):\n    return 2 * x * g\n")
    assert _gs215(fns) == []


def test_without_setup_py_a_compiled_file_marks_the_extension(tmp_path):
    fns = _project(tmp_path, setup=None)
    assert _gs215(fns) == []  # `from . import SCN` alone may name anything in __init__
    (tmp_path / "proj" / "SCN.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    assert _gs215(fns) == [_line(_FNS)]


@pytest.mark.parametrize("odd", [
    "setup(ext_modules=[CppExtension('proj.SCN'\n",  # does not parse
    "CppExtension(name=NAME)\nCppExtension(name=f'{x}.fns')\nCppExtension(123)\n",
    "from setuptools.command.build_ext import BuildExtension\nBuildExtension('proj.fns')\n",
], ids=["syntax-error", "not-a-constant", "build-extension"])
def test_an_odd_setup_py_below_is_read_without_harm(tmp_path, odd):
    """setup.py files of every folder above count; one that names nothing is skipped."""
    fns = _project(tmp_path, files={"setup.py": odd})
    findings = lint(fns, config=False)
    assert [(f.code, f.line) for f in findings if f.code in ("GS215", "GS003")] == [
        ("GS215", _line(_FNS))]


def test_extension_known_from_setup_py_when_a_single_file_is_linted(fixtures_dir):
    """The fixture package's setup.py is found from the folder of the one file linted."""
    path = fixtures_dir / "extensions" / "extpkg" / "functions.py"
    text = path.read_text().splitlines()
    lines = _gs215(path)
    names = [text[n - 1].split("(")[0].strip() for n in lines]
    assert names == ["return SCN.conv_backward", "sops.gather_backward",
                     "return fastgeomops.ball_query_grad", "return knn_backward",
                     "return SCN.Convolution_updateGradInput",
                     "return extpkg.SCN.conv_backward", "return _fsaops.tot_scores_backward"]



_COMPOSED_SETUP = (
    "import os\n\nfrom setuptools import setup\n"
    "from torch.utils.cpp_extension import CUDAExtension\n\n\n"
    "def make_cuda_ext(name, module, sources):\n"
    "    ext = CUDAExtension(name='%s.%s' % (module, name), sources=sources)\n"
    "    return ext\n\n\n"
    "setup(name='proj', ext_modules=[\n"
    "    make_cuda_ext(name='points_cuda', module='proj', sources=['points.cu'])])\n"
)
_COMPOSED = _FNS.replace("from . import SCN", "from . import points_cuda as SCN")


def test_extension_named_by_a_setup_helper_that_composes_its_module(tmp_path):
    """OpenPCDet's setup.py: a helper keeps the CUDAExtension in a local and returns it, and
    the module name is built from `module` and a leaf `name`; the Function imports the leaf
    under another name (`from . import points_cuda as SCN`)."""
    fns = _project(tmp_path, setup=_COMPOSED_SETUP)
    fns.write_text(_COMPOSED)
    assert _gs215(fns) == [_line(_COMPOSED)]
    (tmp_path / "proj" / "points_cuda.py").write_text("def square_backward(x, g):\n    return x\n")
    assert _gs215(fns) == []  # a Python module of that name is Python code


_TABLE = _FNS.replace(
    "class Square(torch.autograd.Function):\n",
    "class Square(torch.autograd.Function):\n"
    "    square_backward = {\"cpu\": SCN.square_backward, \"cuda\": None}\n\n",
).replace("        return SCN.square_backward(x, g)\n\n\nclass SquareOnce",
          "        return Square.square_backward[x.device.type](x, g)\n\n\nclass SquareOnce")


def test_extension_functions_kept_in_a_class_table_and_indexed_by_device(tmp_path):
    """fast-transformers: `dot_backward = {"cpu": ext_cpu.fn, "cuda": ext_cuda.fn}` on the
    Function, called as `Fn.dot_backward[device.type](..., grad_out, ...)`: the subscript is
    not a Triton launch, but the call still runs the extension, on grad_output as it came."""
    fns = _project(tmp_path)
    fns.write_text(_TABLE)
    line = _TABLE.splitlines().index("        return Square.square_backward[x.device.type](x, g)") + 1
    found = {(f.code, f.line) for f in lint(fns, config=False)}
    assert {("GS215", line), ("GS221", line)} <= found
    assert [n for code, n in found if code == "GS215"] == [line]  # SquareOnce: once_differentiable


def test_extension_built_by_a_setup_py_beside_the_package(tmp_path):
    """gpt-neox: megatron/fused_kernels/setup.py builds `fused_rotary_positional_embedding`,
    which megatron/model imports by that top-level name (inside backward): a setup.py in a
    sibling folder of the linted tree, not in a folder above the file."""
    fns = _project(tmp_path, setup=None)
    text = _FNS.replace("from . import SCN", "").replace(
        "        (x,) = ctx.saved_tensors\n        return SCN.square_backward(x, g)\n\n\nclass",
        "        import fused_square\n\n        (x,) = ctx.saved_tensors\n"
        "        return fused_square.backward(x, g)\n\n\nclass", 1)
    fns.write_text(text)
    line = text.splitlines().index("        return fused_square.backward(x, g)") + 1
    assert _gs215(tmp_path) == []  # nothing says fused_square is compiled
    (tmp_path / "fused_kernels").mkdir()
    (tmp_path / "fused_kernels" / "setup.py").write_text(
        "from setuptools import setup\nfrom torch.utils.cpp_extension import CUDAExtension\n\n"
        "setup(name='k', ext_modules=[CUDAExtension(name='fused_square', sources=['sq.cu'])])\n")
    assert _gs215(tmp_path) == [line]


_GROUP = (
    "import torch\n\nfrom . import SCN\n\n\n"
    "class GroupOp(torch.autograd.Function):\n    @classmethod\n"
    "    def forward(cls, ctx, x):\n        ctx.save_for_backward(x)\n"
    "        return cls.forward_op(x)\n\n"
    "    @classmethod\n    def backward(cls, ctx, g):\n        (x,) = ctx.saved_tensors\n"
    "        return cls.backward_op(g.contiguous(), x)\n\n\n"
    "class Exp(GroupOp):\n    forward_op, backward_op = SCN.expm, SCN.expm_backward\n"
)


def test_extension_functions_a_subclass_binds_and_the_base_backward_calls(tmp_path):
    """lietorch: `forward_op, backward_op = backends.expm, backends.expm_backward` on each
    group operation, and the base class's classmethod backward calls `cls.backward_op(...)`."""
    fns = _project(tmp_path)
    fns.write_text(_GROUP)
    line = _GROUP.splitlines().index("        return cls.backward_op(g.contiguous(), x)") + 1
    assert _gs215(fns) == [line]
    fns.write_text(_GROUP.replace("SCN.expm, SCN.expm_backward", "torch.exp, torch.mul"))
    assert _gs215(fns) == []


def test_extension_of_a_namespace_package_declared_by_its_full_name(tmp_path):
    """SoftGroup: the top folder has no __init__.py (a namespace package), so the Function's
    module is read as `ops.functions` and `from . import ops` as `ops.ops`; the top-level
    setup.py builds `top.ops.ops`, the same place on disk: a compiled extension."""
    (tmp_path / "top" / "ops").mkdir(parents=True)
    (tmp_path / "top" / "ops" / "__init__.py").write_text("from .functions import *\n")
    fns = tmp_path / "top" / "ops" / "functions.py"
    text = _FNS.replace("from . import SCN", "from . import ops").replace("SCN.", "ops.")
    fns.write_text(text)
    line = text.splitlines().index("        return ops.square_backward(x, g)") + 1
    assert _gs215(tmp_path) == []  # no setup.py: nothing says `ops` is compiled
    (tmp_path / "setup.py").write_text(_SETUP.replace("'proj.SCN'", "'top.ops.ops'"))
    assert _gs215(tmp_path) == [line]  # Square; SquareOnce is @once_differentiable
    (tmp_path / "setup.py").write_text(_SETUP.replace("'proj.SCN'", "'other.ops.ops'"))
    assert _gs215(tmp_path) == []  # built elsewhere: not the module imported here


_LOADER = (
    "import os\n\nimport torch\nfrom torch.utils.cpp_extension import load\n\n"
    "here = os.path.dirname(__file__)\n\n"
    "if torch.cuda.is_available():\n"
    "    gpu = load('square_cuda', [os.path.join(here, 'square.cu')], verbose=False)\n"
)


def test_extension_loaded_in_a_sibling_package_and_reached_through_it(tmp_path):
    """PAConv: `src/__init__.py` builds `gpu = load(...)` under an `if`, and the Function's
    module does `from .. import src` and calls `src.gpu.fn(...)`: three names deep."""
    fns = _project(tmp_path, setup=None)
    (tmp_path / "proj" / "functions").mkdir()
    (tmp_path / "proj" / "functions" / "__init__.py").write_text("")
    (tmp_path / "proj" / "src").mkdir()
    (tmp_path / "proj" / "src" / "__init__.py").write_text(_LOADER)
    fns.unlink()
    fns = tmp_path / "proj" / "functions" / "square.py"
    text = _FNS.replace("from . import SCN", "from .. import src").replace("SCN.", "src.gpu.")
    fns.write_text(text)
    line = text.splitlines().index("        return src.gpu.square_backward(x, g)") + 1
    assert _gs215(tmp_path) == [line]
    (tmp_path / "proj" / "src" / "__init__.py").write_text(
        "class gpu:\n    @staticmethod\n    def square_backward(x, g):\n        return 2 * x * g\n")
    assert _gs215(tmp_path) == []  # Python code: autograd sees it


_FFI = (
    "from torch.utils.ffi import _wrap_function\n"
    "from ._square import lib as _lib, ffi as _ffi\n\n__all__ = []\n\n\n"
    "def _import_symbols(locals):\n    for symbol in dir(_lib):\n"
    "        locals[symbol] = _wrap_function(getattr(_lib, symbol), _ffi)\n"
    "        __all__.append(symbol)\n\n\n_import_symbols(locals())\n"
)


def test_functions_an_ffi_module_binds_into_itself_at_import(tmp_path):
    """Relation-Shape-CNN: torch.utils.ffi generated `_ext/pointnet2/__init__.py`, which
    binds the C library's functions with `_import_symbols(locals())` at module level; the
    Function's module calls `pointnet2.fn(...)`, a name no statement there binds."""
    fns = _project(tmp_path, setup=None)
    (tmp_path / "proj" / "_ext").mkdir()
    (tmp_path / "proj" / "_ext" / "__init__.py").write_text("")
    ffi = tmp_path / "proj" / "_ext" / "sq"
    ffi.mkdir()
    (ffi / "__init__.py").write_text(_FFI)
    text = _FNS.replace("from . import SCN", "from ._ext import sq").replace("SCN.", "sq.")
    fns.write_text(text)
    line = text.splitlines().index("        return sq.square_backward(x, g)") + 1
    assert _gs215(tmp_path) == [line]
    (ffi / "__init__.py").write_text(_FFI + "\n\ndef square_backward(x, g):\n    return 2 * x * g\n")
    assert _gs215(tmp_path) == []  # bound by a def of the module: Python code
    (ffi / "__init__.py").write_text(_FFI.replace("_import_symbols(locals())",
                                                  "_import_symbols({})"))
    assert _gs215(tmp_path) == []  # the module is not handed to the registrar
