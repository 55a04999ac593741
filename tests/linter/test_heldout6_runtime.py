"""Corpus 6 (held-out, spent) reduced cases, run on CPU (issue 19).

References: autograd of the same computation written out of place, and the caller's tensor as
it was before the call (a clone).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURES = Path(__file__).parent / "fixtures"


def _package(name: str, module: str):
    """fixtures/<name> imported as a package; returns its submodule ``module``."""
    root = FIXTURES / name
    spec = importlib.util.spec_from_file_location(
        f"{name}_fixture", root / "__init__.py", submodule_search_locations=[str(root)])
    package = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = package
    try:
        spec.loader.exec_module(package)
        return importlib.import_module(f"{spec.name}.{module}")
    finally:
        for loaded in [n for n in sys.modules if n.startswith(spec.name)]:
            del sys.modules[loaded]


def _found(name: str) -> set[tuple[str, int, str, str]]:
    return {(Path(f.path).name, f.line, f.code, f.severity)
            for f in lint(FIXTURES / name, config=False)}


@pytest.fixture(scope="module")
def alias_layers():
    return _package("alias_callers", "layers")


def test_callers_through_an_imported_alias_pass_fresh_values_a_warning(alias_layers):
    """GS230's downgrade follows `all_reduce = CenterRows.apply` into the module importing
    it, and does not count torch.distributed.all_reduce(t) there as a call of the alias."""
    torch.manual_seed(0)
    x = torch.randn(4, 5)
    w = torch.randn(5, 6, requires_grad=True)
    out = alias_layers.centered_rows(x, w)  # the matmul saves x and w, not its output
    ref_w = w.detach().clone().requires_grad_()
    ref = x @ ref_w
    ref = ref - ref.mean(-1, keepdim=True)
    torch.testing.assert_close(out, ref)
    weights = torch.randn(4, 6)
    torch.testing.assert_close(torch.autograd.grad((out * weights).sum(), w)[0],
                               torch.autograd.grad((ref * weights).sum(), ref_w)[0])
    found = _found("alias_callers")
    assert ("comm.py", 11, "GS230", "warning") in found
    assert not any(line == 11 and code == "GS101" for _, line, code, _ in found)


def test_a_caller_through_an_imported_alias_reading_it_again_an_error(alias_layers):
    torch.manual_seed(1)
    x = torch.randn(4, 5) + 3.0
    before = x.clone()
    _, peak = alias_layers.centered_cols_and_peak(x)
    assert peak != before.abs().max(), "the caller read the value it passed"
    torch.testing.assert_close(peak, (before - before.mean(0, keepdim=True)).abs().max())
    assert ("comm.py", 24, "GS101", "error") in _found("alias_callers")
