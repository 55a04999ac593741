"""Shapes a docstring states after a few words (``x: Input tensor [batch, in_features]``), as
adapter chains document them: a LoRA linear ``x W^T + s (x A^T) B^T`` is stated with four
distinct sizes that compose, so a backward with the wrong transposes is exercised on the shapes
it is written for. Intervals (``[0, 1]``) and prose in parentheses are not shapes."""

import torch

from gradsmith.discovery.stated import read_statements


class LoRALinear(torch.autograd.Function):
    """Linear layer with a low-rank adapter."""

    @staticmethod
    def forward(ctx, x, weight, A, B, scaling: float):
        """
        Args:
            x: Input tensor [batch, in_features]
            weight: Frozen base weight [out_features, in_features]
            A: Down projection [rank, in_features]
            B: Up projection [out_features, rank]
            scaling: adapter scale (alpha / rank, a float)
        """
        ctx.save_for_backward(x, weight, A, B)
        ctx.scaling = scaling
        return x @ weight.T + (x @ A.T @ B.T) * scaling

    @staticmethod
    def backward(ctx, g):
        x, weight, A, B = ctx.saved_tensors
        s = ctx.scaling
        xa = x @ A.T
        grad_x = g @ weight + (g @ B @ A) * s
        return grad_x, g.T @ x, (g @ B).T @ x * s, g.T @ xa * s, None


class LoRALinearWrongTranspose(LoRALinear):
    """``g @ B.T @ A.T``: the shapes compose only when rank, in and out coincide."""

    @staticmethod
    def backward(ctx, g):
        x, weight, A, B = ctx.saved_tensors
        s = ctx.scaling
        grad_x = g @ weight + (g @ B.T @ A.T) * s
        return grad_x, g.T @ x, (g @ B).T @ x * s, g.T @ (x @ A.T) * s, None


def test_described_docstring_lines_state_shapes_but_intervals_and_prose_do_not():
    said = read_statements(LoRALinear, ["x", "weight", "A", "B", "scaling"])
    assert said.shapes == {"x": ["batch", "in_features"], "weight": ["out_features", "in_features"],
                           "A": ["rank", "in_features"], "B": ["out_features", "rank"]}

    class Interval(LoRALinear):
        @staticmethod
        def forward(ctx, p, dim):
            """p: probability [0, 1]
            dim: the dimension (0 or 1)"""
            return p

    assert read_statements(Interval, ["p", "dim"]).shapes == {}


def _rows(tmp_path, *names):
    # Zero-config through the command, in process: the file holds only this module's classes.
    import inspect
    import json
    import sys

    from gradsmith.cli import main as cli_main

    source = tmp_path / "lora.py"
    source.write_text("import torch\n\n\n" + inspect.getsource(LoRALinear) + "\n\n"
                      + inspect.getsource(LoRALinearWrongTranspose))
    out, old = tmp_path / "report.json", sys.stdout
    with open(out, "w") as handle:
        sys.stdout = handle
        try:
            cli_main(["check", *(f"{source}::{n}" for n in names), "--no-isolate",
                      "--format", "json"])
        finally:
            sys.stdout = old
    return {r["name"].split("::")[-1]: r for r in json.loads(out.read_text())["results"]}


def test_documented_shapes_are_used_where_forward_also_runs_on_another_rank(tmp_path):
    # A 1-D B broadcasts through x @ A.T @ B.T: forward runs on it, but B is documented 2-D.
    rows = _rows(tmp_path, "LoRALinear", "LoRALinearWrongTranspose")
    right, wrong = rows["LoRALinear"], rows["LoRALinearWrongTranspose"]
    assert "B (3, 5) as [out_features, rank] (from its docstring)" in right["inputs"] or \
        "B: float64 (3, 5) as [out_features, rank]" in right["inputs"], right["inputs"]
    assert right["verdict"] == "pass", right
    errors = [f["code"] for f in wrong["report"]["findings"] if f["severity"] == "error"]
    assert wrong["verdict"] == "fail" and errors == ["backward-error"], wrong


def test_the_documented_shapes_agree_with_autograd():
    gen = torch.Generator().manual_seed(0)
    x, w, a, b = (torch.randn(*s, dtype=torch.float64, generator=gen, requires_grad=True)
                  for s in ((2, 8), (3, 8), (5, 8), (3, 5)))
    LoRALinear.apply(x, w, a, b, 0.5).sum().backward()
    got = [t.grad for t in (x, w, a, b)]
    ref = [t.detach().clone().requires_grad_() for t in (x, w, a, b)]
    (ref[0] @ ref[1].T + ref[0] @ ref[2].T @ ref[3].T * 0.5).sum().backward()
    for g, r in zip(got, ref):
        torch.testing.assert_close(g, r.grad)
