"""A Triton kernel whose option's *value* picks the direction (``if operation == 0: store y``
/ ``elif operation == 1: store x``, nested under another option's ``else``) writes only what
the launch's constant selects (fixtures/fresh_dev8_select/scan.py). Run in Triton's
interpreter on CPU: the input the linter calls written changes, the others keep their values
(compared with a copy taken before the call)."""

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
SCAN = FIXTURES / "fresh_dev8_select" / "scan.py"


@pytest.fixture(scope="module")
def scan():
    from gradsmith._triton import interpreting, prepare

    if not prepare() and not interpreting() and not torch.cuda.is_available():
        pytest.skip("Triton kernels cannot run here (no interpreter, no GPU)")
    sys.path.insert(0, str(FIXTURES))
    try:
        yield importlib.import_module("fresh_dev8_select.scan")
    finally:
        sys.path.remove(str(FIXTURES))


def test_only_the_launch_that_selects_the_input_store_is_reported():
    found = [(f.line, f.code) for f in lint(SCAN, config=False) if f.severity == "error"]
    assert found == [(51, "GS101")]


def test_operation_zero_reads_x_and_operation_one_writes_it(scan):
    torch.manual_seed(0)
    x = torch.randn(8)
    before = x.clone()
    torch.testing.assert_close(scan.Scan.apply(x), before * 2)  # onebyone=1, operation=0
    assert torch.equal(x, before)
    y = torch.randn(8)
    y_before = y.clone()
    torch.testing.assert_close(scan.Merge.apply(y), y_before)  # onebyone=0, operation=1
    assert torch.equal(y, y_before)
    scan.MergeInto.apply(x, y)  # onebyone=1, operation=1: x <- 2 * y
    torch.testing.assert_close(x, y_before * 2)
    assert not torch.equal(x, before)
