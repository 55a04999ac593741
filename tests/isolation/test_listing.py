"""A file that cannot hold a Function is not imported to list it (issue 20: a directory cost
0.1-0.18 s per file, 6 minutes for 2,000 files, even for files with no Function); a file that
may hold one still is, and so is anything the text alone cannot settle."""

from __future__ import annotations

import pytest

from gradsmith.discovery import Source
from gradsmith.discovery.prefilter import needs_import

# Imports only the standard library and torch, names no Function: imported, it would leave a
# marker and fail (an import-error row, exit 2).
HELPERS = """\
import os
import torch

open(os.environ["GRADSMITH_TEST_PIDS"] + ".helpers-imported", "w").close()
raise RuntimeError("helpers.py must not be imported")


def scale(x):
    return torch.tanh(x) * 2
"""


def test_a_file_without_a_possible_function_is_not_imported(runner, write, procs):
    write("pkgless/helpers.py", HELPERS, header=False)
    write("pkgless/ops.py", "record('ops-imported')\n", procs.square)
    code, doc, err = runner.check("pkgless", "--no-compat")
    assert [r["name"] for r in doc["results"]] == ["pkgless/ops.py::Square"], err
    assert doc["results"][0]["verdict"] == "pass"
    assert code == 0
    assert "helpers" not in err
    assert not (runner.cwd / "pids.txt.helpers-imported").exists()
    assert "ops-imported" in runner.recorded().values()  # a file with a Function still is


@pytest.mark.parametrize(("text", "imported"), [
    ("import math\n\ndef area(r):\n    return math.pi * r * r\n", False),
    ("import torch\nfrom torch import nn\n\nclass Net(nn.Module):\n    pass\n", False),
    ("from torch.autograd import Function\n\nclass F(Function):\n    pass\n", True),
    ("import torch\n\nclass F(torch.autograd.function.InplaceFunction):\n    pass\n", True),
    ("from mylib import Base\n\nclass F(Base):\n    pass\n", True),  # a Function elsewhere
    ("import mylib\n\nSwish = mylib.Swish\n", True),  # a re-export
    ("from . import ops\n", True),
    ("import torch\n\n@torch.library.custom_op('x::y', mutates_args=())\ndef y(t):\n"
     "    return t\n", True),
    ("from gradsmith import example as ex\n", True),
    ("import importlib\n\nm = importlib.import_module('ops')\n", True),
    ("exec(open('ops.py').read())\n", True),
    ("def broken(:\n", True),  # the worker reports the syntax error
], ids=["stdlib", "nn-module", "function", "torch-base", "user-base", "reexport", "relative",
        "custom-op", "example", "dynamic-import", "exec", "syntax-error"])
def test_which_files_need_importing(tmp_path, text, imported):
    path = tmp_path / "mod.py"
    path.write_text(text)
    assert needs_import(Source("file", str(path), "mod.py", walked=True)) is imported


def test_a_module_shadowing_the_standard_library_beside_the_file_is_user_code(tmp_path):
    (tmp_path / "random.py").write_text("from torch.autograd import Function\n")
    path = tmp_path / "mod.py"
    path.write_text("from random import Op\n")
    assert needs_import(Source("file", str(path), "mod.py", walked=True))


def test_named_files_modules_packages_and_named_objects_are_always_imported(tmp_path):
    init = tmp_path / "__init__.py"
    init.write_text("import math\n")
    assert needs_import(Source("file", str(init), "__init__.py", walked=True))
    assert needs_import(Source("module", "math", "math"))
    plain = tmp_path / "plain.py"
    plain.write_text("import math\n")
    assert not needs_import(Source("file", str(plain), "plain.py", walked=True))
    assert needs_import(Source("file", str(plain), "plain.py"))  # named: its errors are shown
    assert needs_import(Source("file", str(plain), "plain.py", names=("area",)))
