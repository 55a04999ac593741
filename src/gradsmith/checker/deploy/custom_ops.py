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
        return _inner_ops(session)
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


def _inner_ops(session: Session) -> list[Finding]:
    """A Function (or function) that *calls* custom ops: ``torch.compile`` and ``torch.export``
    trace those with their fake kernels, so a fake kernel that gives the wrong shape shows up
    there only as a compile or export error. Check each op forward called, on the arguments it
    got (opcheck's schema and fake-tensor tests: the Function owns the backward), and name the
    fake kernel that is wrong."""
    calls = _custom_op_calls(session)
    if not calls:
        raise Skip("neither a torch.library.custom_op nor calling one")
    findings = []
    for op, args, kwargs in calls:
        try:
            with no_trace_log():
                results = torch.library.opcheck(op, args, kwargs, raise_exception=False,
                                                test_utils=("test_schema", "test_faketensor"))
        except Exception as exc:  # noqa: BLE001 - opcheck itself could not run
            findings.append(Finding(
                "custom-op-check-error", "warning",
                f"torch.library.opcheck could not run on {op}, which forward calls: "
                f"{first_line(exc)}", "run torch.library.opcheck(op, args) by hand", NAME))
            continue
        for test, outcome in results.items():
            found = None if outcome == "SUCCESS" else _finding(test, str(outcome))
            if found is not None:
                found.message = f"{_named(op)}, which forward calls: {found.message}"
                found.details["op"] = str(op)
                findings.append(found)
    return findings


def _custom_op_calls(session: Session) -> list[tuple[Any, tuple, dict]]:
    """The custom ops (outside aten/prims) one eager forward calls, each with the arguments
    of its first call (detached copies)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    calls: dict[Any, tuple[Any, tuple, dict]] = {}

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func.namespace not in _TORCH_NAMESPACES and func not in calls:
                copy = torch.utils._pytree.tree_map_only(
                    torch.Tensor, lambda t: t.detach().clone(), (args, kwargs))
                calls[func] = (func, *copy)
            return func(*args, **kwargs)

    subject = session.subject
    try:
        with Record():
            subject.call([x.clone() for x in subject.base()])
    except Exception:  # noqa: BLE001 - forward's own errors are the eager checks' findings
        return []
    return list(calls.values())


#: Operator namespaces of PyTorch itself: every other one is a custom op.
_TORCH_NAMESPACES = {"aten", "prim", "prims", "_c10d_functional", "c10d", "quantized",
                     "profiler", "debugprims", "higher_order"}


def _named(op: Any) -> str:
    """``the custom op ns::name (fake kernel fn at file:line)``."""
    from torch._library import custom_ops

    qualname = op._schema.name
    fake = getattr(custom_ops.OPDEFS.get(qualname), "_abstract_fn", None)
    code = getattr(fake, "__code__", None)
    where = (f" (fake kernel {fake.__name__} at {code.co_filename}:{code.co_firstlineno})"
             if code is not None else "")
    return f"the custom op {qualname}{where}"


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
