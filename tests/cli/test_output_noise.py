"""``gradsmith check`` text output without noise (issue 21): torch's advice to its own
developers never appears in a finding."""

from __future__ import annotations

import json

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


# ---- the text output of gradsmith check: one line per pass, root cause first, merged ------

SCALE = '''
class Scale(Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad * w, grad * x
'''


def _section(out: str, name: str) -> list[str]:
    """The lines of ``name``'s FAIL section (heading excluded)."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"── FAIL {name} "))
    end = next((i for i in range(start + 1, len(lines))
                if lines[i].startswith(("── ", "warnings of", "compatibility"))
                or " passed, " in lines[i]), len(lines))
    return lines[start + 1:end]


def test_a_passing_function_is_one_line(write, snippets, gradsmith_cli) -> None:
    write("ops.py", snippets.good, SCALE, snippets.bad)
    code, out, _ = gradsmith_cli("ops.py", "--no-isolate", "--no-compat")
    assert code == 1
    (row,) = [line for line in out.splitlines() if "ops.py::Cube" in line]  # no warnings
    assert "│" in row and "PASS" in row
    assert "Checks run" not in out and "structure, mutation" not in out  # that is -v
    assert "unneeded-grad" not in out  # info: harmless, not shown by default
    _, verbose, _ = gradsmith_cli("ops.py", "--no-isolate", "--no-compat", "-v")
    assert "Checks run" in verbose and "INFO unneeded-grad" in verbose


def test_a_failure_leads_with_its_cause_and_repeats_are_merged(write, snippets,
                                                               gradsmith_cli) -> None:
    write("ops.py", snippets.bad)
    _, doc, _ = gradsmith_cli("ops.py", "--no-isolate", "--no-compat", "--format", "json")
    findings = json.loads(doc)["results"][0]["report"]["findings"]
    mismatches = [f for f in findings if f["code"] == "gradient-mismatch"]
    assert {f["input"] for f in mismatches} == {"x", "w"}  # two findings, one cause
    _, out, _ = gradsmith_cli("ops.py", "--no-isolate", "--no-compat")
    section = _section(out, "ops.py::BadMatmul")
    assert section[0].startswith("  ERROR gradient-mismatch [x, w] (2 findings")
    assert section[0].count("gradient-mismatch") == 1
    assert sum("gradient-mismatch" in line for line in section) == 1
    assert section[1].lstrip().startswith("fix: ")


def test_quiet_prints_only_failures_and_the_summary(write, snippets, gradsmith_cli) -> None:
    write("ops.py", snippets.good, snippets.bad)
    code, out, _ = gradsmith_cli("ops.py", "--no-isolate", "--quiet")
    assert code == 1
    assert "ops.py::Cube" not in out and "│" not in out and "compatibility" not in out
    assert "── FAIL ops.py::BadMatmul" in out and "ERROR gradient-mismatch" in out
    assert out.rstrip().splitlines()[-1].startswith("1 passed, 1 failed, 0 skipped in ")


def test_warnings_shared_by_passing_functions_are_said_once(write, snippets,
                                                            gradsmith_cli) -> None:
    # both old-style: torch.func refuses each (func-needs-setup-context, a warning)
    write("ops.py", snippets.good, SCALE)
    code, out, _ = gradsmith_cli("ops.py", "--no-isolate")
    assert code == 0
    shared = [line for line in out.splitlines() if "func-needs-setup-context" in line]
    assert len(shared) == 1 and "ops.py::Cube" in shared[0] and "ops.py::Scale" in shared[0]
