"""``custom_op``: for ``torch.library.custom_op`` operators, what ``torch.library.opcheck``
tests: the schema matches what the kernel does (no undeclared mutation or aliasing), autograd is
registered the supported way, the fake (meta) kernel exists and gives the real kernel's
shapes and dtypes, and AOTAutograd can trace the op (what compile and export run).

The gradient *values* are the eager checks' job (opcheck does not look at them).
"""

from __future__ import annotations

from typing import Any

import torch

from gradsmith.checker.deploy._common import first_line, no_trace_log
from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session, Skip

NAME = "custom_op"
_NO_FAKE = "no fake impl"
_NO_AUTOGRAD = "no autograd formula was registered"


def is_custom_op(obj: Any) -> bool:
    """True for a ``torch.library.custom_op`` (``CustomOpDef``) or a ``torch.ops`` overload."""
    from torch._library.custom_ops import CustomOpDef

    return isinstance(obj, (CustomOpDef, torch._ops.OpOverload, torch._ops.OpOverloadPacket))


def run(session: Session) -> list[Finding]:
    op = session.subject.target.call
    if not is_custom_op(op):
        raise Skip("not a torch.library.custom_op")
    subject = session.subject
    args = subject.args.build([x.clone().requires_grad_(True) for x in subject.base()],
                              subject.dtype)
    try:
        with no_trace_log():
            results = torch.library.opcheck(op, args, raise_exception=False)
    except Exception as exc:  # noqa: BLE001 - opcheck itself could not run
        return [Finding("custom-op-check-error", "warning",
                        f"torch.library.opcheck could not run: {first_line(exc)}",
                        "run torch.library.opcheck(op, args) by hand", NAME)]
    findings = []
    fake_failed = results.get("test_faketensor", "SUCCESS") != "SUCCESS"
    for test, outcome in results.items():
        if outcome == "SUCCESS" or (fake_failed and test == "test_aot_dispatch_dynamic"):
            continue  # AOT dispatch runs the fake kernel: its failure repeats test_faketensor
        found = _finding(test, str(outcome))
        if found is not None:
            findings.append(found)
    return findings


def _finding(test: str, message: str) -> Finding | None:
    short = message.strip().splitlines()[0][:400] if message.strip() else message
    details = {"opcheck_test": test}
    if test == "test_faketensor" and _NO_FAKE in message:
        return Finding(
            "custom-op-no-fake", "warning",
            "the custom op has no fake (meta) kernel: torch.compile and torch.export cannot "
            "trace it (opcheck test_faketensor)",
            "register one that computes only the output's shape and dtype: "
            "`@op.register_fake` `def _(x): return torch.empty_like(x)`", NAME,
            details=details)
    if test == "test_faketensor":
        return Finding(
            "custom-op-fake-mismatch", "error",
            f"the fake kernel disagrees with the real one: {short} (opcheck test_faketensor); "
            "a compiled or exported model then plans with wrong shapes or dtypes",
            "make register_fake return exactly the real kernel's output shapes, dtypes and "
            "devices", NAME, details=details)
    if test == "test_aot_dispatch_dynamic" and _NO_AUTOGRAD in message:
        return None  # the eager checks already fail on the missing gradient formula
    if test == "test_schema":
        return Finding(
            "custom-op-schema", "error",
            f"the op does something its schema does not declare: {short} (opcheck "
            "test_schema)",
            "declare mutated inputs in mutates_args, and never return an input or a view of "
            "one (return a clone)", NAME, details=details)
    if test == "test_autograd_registration":
        return Finding(
            "custom-op-autograd-registration", "error",
            f"autograd is registered in a way that breaks under some transforms: {short} "
            "(opcheck test_autograd_registration)",
            "attach the backward with op.register_autograd(backward, setup_context=...) "
            "instead of an autograd.Function inside the kernel", NAME, details=details)
    return Finding(
        "custom-op-aot-dispatch", "warning",
        f"AOTAutograd cannot trace the op (what compile and export run): {short} (opcheck "
        f"{test})",
        "make the fake kernel and register_autograd's backward traceable (torch operations "
        "only)", NAME, details=details)
