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
