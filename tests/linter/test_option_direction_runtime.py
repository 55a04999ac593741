"""A Triton kernel whose launch option picks the pointer it stores through
(``optr = b if A_TO_B else a``, or ``if IN_PLACE: ... else: ...``) writes only the pointer the
option selects (issue 19, corpus 8 dev: a false GS101 on a gather that only reads its input).
Run in Triton's interpreter on CPU: the inputs the linter calls written change, the others keep
their values, compared with a copy taken before the call."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

pytest.importorskip("triton", reason="needs triton: pip install 'gradsmith[triton]'")
pytest.importorskip("numpy", reason="Triton's interpreter needs numpy")

FIXTURES = Path(__file__).parent / "fixtures"
OPS = FIXTURES / "copydir" / "ops.py"


@pytest.fixture(scope="module")
def ops():
    from gradsmith._triton import interpreting, prepare

    if not prepare() and not interpreting() and not torch.cuda.is_available():
        pytest.skip("Triton kernels cannot run here (no interpreter, no GPU)")
    sys.path.insert(0, str(FIXTURES))
    try:
        yield importlib.import_module("copydir.ops")
    finally:
        sys.path.remove(str(FIXTURES))


def test_lint_reports_exactly_the_writes_the_options_select():
    lines = OPS.read_text().splitlines()
    found = sorted(f.line for f in lint(OPS.parent, config=False) if f.code == "GS101")
    assert found == [i + 1 for i, text in enumerate(lines) if "# GS101" in text]


@pytest.mark.parametrize("name, written", [
    ("Gather", False), ("Doubled", False), ("ScatterInto", True), ("DoubledInPlace", True),
])
def test_the_kernel_writes_the_input_only_where_reported(ops, name, written):
    torch.manual_seed(0)
    x = torch.randn(100)
    before = x.clone()
    out = getattr(ops, name).apply(x)
    torch.testing.assert_close(out, before * 2 if name != "ScatterInto" else x)
    assert (not torch.equal(x, before)) is written
