"""Fixtures for the ``gradsmith check`` command-line tests: small user files written to tmp."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

HEADER = """\
import torch
from torch.autograd import Function
import gradsmith
"""

# A correct Function (no registered example: inputs are synthesised).
GOOD = """
class Cube(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 3 * x * x * grad
"""

# The gradient of x @ w with w's gradient transposed in the wrong place: the classic bug.
BAD = """
@gradsmith.example(lambda: (torch.randn(4, 3, dtype=torch.float64, requires_grad=True),
                            torch.randn(3, 3, dtype=torch.float64, requires_grad=True)))
class BadMatmul(Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x @ w

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad @ w, (x.t() @ grad).t()
"""

# A planted wrong backward beside a test's own Functions: forward doubles, backward triples.
TRIPLES = """
@gradsmith.example(lambda: (torch.randn(3, 4, dtype=torch.float64, requires_grad=True),))
class TriplesInBackward(Function):
    @staticmethod
    def forward(ctx, x):
        return 2 * x

    @staticmethod
    def backward(ctx, grad):
        return 3 * grad
"""

# forward needs a string argument that cannot be synthesised (the allowed values live in a
# module constant, which synthesis does not read).
NO_INPUTS = """
MODES = ("fast", "exact")


class NeedsMode(Function):
    @staticmethod
    def forward(ctx, x, mode):
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}")
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad, None
"""

ABORTS = """
import os

@gradsmith.example(lambda: (torch.ones(3, dtype=torch.float64, requires_grad=True),))
class Aborts(Function):
    @staticmethod
    def forward(ctx, x):
        os.abort()

    @staticmethod
    def backward(ctx, grad):
        return grad
"""

HANGS = """
import time

@gradsmith.example(lambda: (torch.ones(3, dtype=torch.float64, requires_grad=True),))
class Hangs(Function):
    @staticmethod
    def forward(ctx, x):
        time.sleep(600)
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad
"""

RAISES_AT_IMPORT = """
raise RuntimeError("broken at import time")
"""


# Tests of the worker server's own start: a fresh interpreter, never the template's fork.
FRESH_SERVERS = {"test_startup_timeout_from_pyproject_and_the_command_line_overrides_it"}


@pytest.fixture(autouse=True)
def _template(request, monkeypatch):
    """The test run's warm worker template is running before each test here, so that the
    ``gradsmith check`` commands a test starts fork their server from it (the root
    conftest.py); tests of the server's start get fresh ones."""
    from gradsmith.isolation.template import ADDRESS_ENV, install

    if request.function.__name__ not in FRESH_SERVERS:
        request.getfixturevalue("warm_worker_template")
        yield
        return
    monkeypatch.delenv(ADDRESS_ENV, raising=False)
    previous = install(None)
    yield
    install(previous)


@pytest.fixture
def write(tmp_path: Path):
    """``write(name, *bodies)`` writes a module (with the torch/gradsmith imports) to tmp."""

    def _write(name: str, *bodies: str, header: bool = True) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        text = (HEADER if header else "") + "".join(textwrap.dedent(b) for b in bodies)
        path.write_text(text)
        return path

    return _write


@pytest.fixture
def gradsmith_cli(capsys, monkeypatch, tmp_path):
    """Run ``gradsmith check ARGS`` in-process from tmp; return (exit code, stdout, stderr)."""
    from gradsmith.cli import main

    monkeypatch.chdir(tmp_path)  # rows are labelled relative to the working directory

    def _run(*args: str) -> tuple[int, str, str]:
        code = main(["check", *map(str, args)])
        out, err = capsys.readouterr()
        return code, out, err

    return _run


@pytest.fixture
def check_rows(gradsmith_cli):
    """``check_rows(*args)``: ``gradsmith check ARGS --format json`` in-process, returning the
    exit code and the rows by Function name."""

    def _run(*args: str) -> tuple[int, dict]:
        code, out, _ = gradsmith_cli(*args, "--format", "json")
        return code, {r["name"].split("::")[1]: r for r in json.loads(out)["results"]}

    return _run


@pytest.fixture
def snippets():
    """The module bodies above, by name (tests cannot import conftest in importlib mode)."""
    return SimpleNamespace(good=GOOD, bad=BAD, no_inputs=NO_INPUTS, aborts=ABORTS, hangs=HANGS,
                           raises_at_import=RAISES_AT_IMPORT, triples=TRIPLES)
