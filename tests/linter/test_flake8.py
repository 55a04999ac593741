"""The flake8 plugin yields flake8-style tuples for the same findings."""

import ast

from gradsmith.linter import lint
from gradsmith.linter.flake8 import Plugin

SRC = (
    "import torch\n\n\nclass Fn(torch.autograd.Function):\n    @staticmethod\n"
    "    def forward(ctx, x):\n        return x.data * 2\n\n    @staticmethod\n"
    "    def backward(ctx, g):\n        g *= 2\n        return g\n"
)


def test_plugin_reports_like_lint(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(SRC)
    results = list(Plugin(ast.parse(SRC), filename=str(path)).run())
    expected = [(f.line, f.col - 1, f.code) for f in lint(source=SRC)]
    assert [(line, col, msg.split()[0]) for line, col, msg, _ in results] == expected
    assert all(kind is Plugin for *_, kind in results)
    lines = SRC.splitlines(keepends=True)
    assert list(Plugin(ast.parse(SRC), filename="x.py", lines=lines).run()) == results
