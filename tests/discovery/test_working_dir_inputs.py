"""A Function whose forward opens a file by a path relative to the working directory, which
exists next to its module, is checked there, and the row says so (corpus 11a dev: torcwa's
``example/Materials.py`` reads ``'Materials_data/aSiH.txt'``; run from the project root every
input raised FileNotFoundError and the row was a skip that hid a defect). Nothing is guessed: the
file must exist where the check moves to, and the working directory is restored after the row.
Reduced cases written here; the reference is autograd of ``scale * x`` with the file's scale.
"""

from __future__ import annotations

import os

import pytest
import torch
from source_cases import load_source, write

import gradsmith
from gradsmith.discovery.synthesize import NoInputs, Synthesized, synthesize

TABLE = """
    import torch


    def _scale():
        with open("data/scale.txt") as f:
            return float(f.read())


    class Scaled(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, step=0.005):
            ctx.scale = _scale()
            return ctx.scale * x

        @staticmethod
        def backward(ctx, g):
            grad = FACTOR * ctx.scale * g
            return grad
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project whose example folder holds the module and its data; run from the root."""
    def make(factor: str, data: bool = True):
        example = tmp_path / "proj" / "example"
        if data:
            write(example / "data" / "scale.txt", "1.5\n")
        path = example / f"table_{factor}.py"
        write(path, TABLE.replace("FACTOR", factor))
        monkeypatch.chdir(tmp_path / "proj")
        return load_source(path, f"gs_table_{factor}_{int(data)}").Scaled
    return make


def test_the_check_runs_next_to_the_module_and_says_so(project):
    fn = project("1")
    root = os.getcwd()
    found = synthesize(fn)
    assert isinstance(found, Synthesized), found  # before: NoInputs (FileNotFoundError)
    assert "working directory example/" in found.description and "data/scale.txt" in found.description
    assert "step" not in found.description  # backward returns one value: callers pass x only
    assert os.getcwd() == os.path.join(root, "example")
    (x,) = found.args
    (got,) = torch.autograd.grad(fn.apply(x).sum(), x)
    y = x.detach().clone().requires_grad_(True)
    (want,) = torch.autograd.grad((1.5 * y).sum(), y)
    torch.testing.assert_close(got, want)
    assert gradsmith.check(fn, *found.args, compat=False).passed


def test_a_planted_wrong_backward_still_fails_there(project):
    fn = project("2")
    found = synthesize(fn)
    report = gradsmith.check(fn, *found.args, compat=False)
    assert report.verdict == "FAILED" and report.codes("error"), report


def test_a_file_that_exists_nowhere_stays_a_skip_in_the_same_folder(project):
    fn = project("1", data=False)
    root = os.getcwd()
    found = synthesize(fn)
    assert isinstance(found, NoInputs) and "FileNotFoundError" in found.reason
    assert os.getcwd() == root


def test_the_command_line_row_and_the_working_directory_after_it(project, capsys):
    from gradsmith.cli import main

    project("1")
    root = os.getcwd()
    code = main(["check", "example/table_1.py::Scaled", "--no-isolate", "--no-compat"])
    out = capsys.readouterr().out
    assert code == 0 and "1 passed" in out, out
    assert os.getcwd() == root  # restored after the row


IMPORTED = """
    import torch

    with open("data/scale.txt") as f:
        SCALE = float(f.read())


    class Scaled(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return SCALE * x

        @staticmethod
        def backward(ctx, g):
            return FACTOR * SCALE * g
"""


@pytest.mark.parametrize("factor", ["1", "2"])
def test_a_module_reading_its_data_on_import_is_imported_next_to_it(
        tmp_path, monkeypatch, capsys, factor):
    from gradsmith.cli import main
    from gradsmith.discovery.collect import load_module

    example = tmp_path / "proj" / "example"
    write(example / "data" / "scale.txt", "1.5\n")
    path = write(example / f"imported_{factor}.py", IMPORTED.replace("FACTOR", factor))
    monkeypatch.chdir(tmp_path / "proj")
    root = os.getcwd()
    assert load_module("file", path).SCALE == 1.5  # before: import failed, FileNotFoundError
    assert os.getcwd() == root  # restored at once
    code = main(["check", f"example/imported_{factor}.py::Scaled", "--no-isolate", "--no-compat"])
    out = capsys.readouterr().out
    assert "import failed" not in out and (code == 0) is (factor == "1"), out
    assert ("1 passed" in out) is (factor == "1")
    assert os.getcwd() == root
