"""``gradsmith check`` text output without noise (issue 21): torch's advice to its own
developers never appears in a finding."""

from __future__ import annotations

import torch

from gradsmith.checker.report import Finding


def _dynamo_text() -> str:
    """The text torch._dynamo appends to an exception it raises from user code."""
    from torch._dynamo.exc import augment_exc_message

    exc = RuntimeError("Graph break in user code: data-dependent branch")
    exc.real_stack = []
    augment_exc_message(exc)
    return str(exc)


def _module_text() -> str:
    try:
        torch.nn.Module().get_extra_state()
    except RuntimeError as exc:
        return str(exc)
    raise AssertionError("get_extra_state did not raise")


def test_torch_boilerplate_never_reaches_a_finding() -> None:
    for torch_text, kept in ((_dynamo_text(), "data-dependent branch"),
                             (_module_text(), "should never be called")):
        assert "issue" in torch_text.lower() or "reporting a bug" in torch_text  # torch's own
        finding = Finding("compile-error", "warning", f"compile raised RuntimeError: {torch_text}",
                          f"see {torch_text}", "compile")
        for text in (finding.message, finding.hint, str(finding.to_dict())):
            assert kept in text
            low = text.lower()
            assert "file an issue" not in low and "reporting a bug" not in low
            assert "torchdynamo_verbose" not in low and "report this bug" not in low


class _Scale(torch.autograd.Function):
    """Correct, and computes both gradients whether or not each is needed (most code does)."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad * w, grad * x


def test_unneeded_grad_is_info_not_a_warning() -> None:
    import gradsmith

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(3, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    report = gradsmith.check(_Scale, x, w)
    unneeded = [f for f in report.findings if f.code == "unneeded-grad"]
    assert {f.input for f in unneeded} == {"x", "w"}  # still said: wasted work
    assert all(f.severity == "info" for f in unneeded)  # but no harm: not a warning
    assert report.passed and not [f for f in report.findings if f.severity != "info"]
    # the gradients it computes are right: autograd of the same expression
    ref = torch.autograd.grad((x * w).sum(), (x, w))
    got = torch.autograd.grad(_Scale.apply(x, w).sum(), (x, w))
    torch.testing.assert_close(got, ref)
