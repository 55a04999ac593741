"""``onnx``: ``torch.onnx.export`` of a module that calls the Function, run under ONNX Runtime.

Opt-in (seconds per Function, and the ``onnx`` extra: ``onnx``, ``onnxruntime``,
``onnxscript``): it runs when asked for (``gradsmith check --require onnx``,
``gradsmith.check(..., onnx=True)`` or ``checks=[..., "onnx"]``).

Each exporter (the TorchScript-based ``dynamo=False`` and, where torch has it, the
``dynamo=True`` one) exports in float32, the precision models are deployed in. The exported
model is run on the example inputs *and on a second draw* of them (same shapes and dtypes,
other values), each compared with eager. An export is a trace: a value the forward reads into
Python (``.item()``, ``.tolist()``, a branch on a tensor) is baked into the graph as a
constant, and the input it came from may be dropped. The model then agrees on the example it
was traced with and silently computes something else on any other input, which only the second
draw shows. ONNX keeps the forward only: gradients are not compared.
"""

from __future__ import annotations

import io
import logging
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from gradsmith._requires import ONNX_INSTALL, onnx_missing
from gradsmith.checker.deploy._common import (
    comparable_only,
    first_line,
    forward_is_random,
    modules_to,
    quiet_dynamo,
    relative_error,
    user_frame_of,
)
from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session, Skip
from gradsmith.checker.subject import seeded

NAME = "onnx"
DTYPE = torch.float32
HINT = ("keep the forward a function of its tensor inputs: no .item(), .tolist(), float(t) or "
        "Python branch on a tensor's value (use torch ops, torch.where); a value that really "
        "is a constant belongs in the module, not in an input")


def exporters() -> list[str]:
    """The exporters to try: TorchScript-based always, dynamo when torch has it."""
    import inspect

    names = ["torchscript"]
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        names.append("dynamo")
    return names


class _Outputs(torch.nn.Module):
    """``forward(*tensors)``: the target on the argument tuple rebuilt around ``tensors``
    (everything else baked in), returning the Function's differentiable outputs."""

    def __init__(self, session: Session, flat: list[Any], spec: Any, pos: list[int]) -> None:
        super().__init__()
        self.session, self.flat, self.spec, self.pos = session, flat, spec, pos

    def forward(self, *tensors: torch.Tensor) -> tuple:
        flat = list(self.flat)
        for i, t in zip(self.pos, tensors):
            flat[i] = t.clone()  # a clone: an in-place Function must not modify the input
        subject = self.session.subject
        return tuple(subject.select(subject.target.call(*tree_unflatten(flat, self.spec))))


def run(session: Session) -> list[Finding]:
    return comparable_only(session, _run(session), NAME)


def _run(session: Session) -> list[Finding]:
    if onnx_missing():
        raise Skip(f"the onnx extra is not installed ({ONNX_INSTALL})")
    if forward_is_random(session):
        raise Skip("the forward draws random numbers: ONNX Runtime draws its own, so its "
                   "outputs cannot be compared with eager")
    subject = session.subject
    args = modules_to(subject.args.build([x.detach().to(DTYPE) for x in subject.base()], DTYPE),
                      DTYPE)
    flat, spec = tree_flatten(tuple(args))
    pos = [i for i, v in enumerate(flat) if isinstance(v, torch.Tensor)]
    draws = [[flat[i].detach() for i in pos], _other_draw(session, [flat[i] for i in pos])]
    module = _Outputs(session, flat, spec, pos)
    wants = []
    for draw in draws:
        try:
            with torch.no_grad():
                wants.append([o.detach() for o in seeded(subject.seed, module, *draw)])
        except Exception as exc:  # noqa: BLE001
            if not wants:  # the float32 check (precision) reports why
                raise Skip(f"the Function raises in float32 ({first_line(exc)}), the "
                           "precision ONNX models are exported in") from None
            draws = draws[:1]  # the second draw is outside eager's domain: the example only
    findings = []
    for exporter in exporters():
        found = _check_exporter(session, module, exporter, draws, wants)
        if found is not None:
            findings.append(found)
    return findings


def _other_draw(session: Session, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """Same shapes and dtypes, other values: each floating tensor scaled elementwise by a
    seeded factor in [0.5, 1.5) (signs and zeros kept, so a domain such as x > 0 holds);
    integer tensors (indices, counts) kept as they are."""
    out = []
    gen = session.generator(97)
    for t in tensors:
        if t.is_floating_point():
            factor = torch.rand(t.shape, generator=gen, dtype=torch.float64) + 0.5
            out.append((t.detach().to(torch.float64) * factor.to(t.device)).to(t.dtype))
        else:
            out.append(t.detach().clone())
    return out


def _check_exporter(session: Session, module: torch.nn.Module, exporter: str,
                    draws: list[list[torch.Tensor]], wants: list[list[torch.Tensor]]
                    ) -> Finding | None:
    names = [f"input{i}" for i in range(len(draws[0]))]
    try:
        runner = _export(module, exporter, draws[0], names)
    except Exception as exc:  # noqa: BLE001 - any export failure is the finding
        return _export_error(exporter, exc)
    labels = _labels(session, module.pos)
    dropped = [labels[i] for i, n in enumerate(names) if n not in runner.inputs]
    errors = []
    for draw, want in zip(draws, wants):
        try:
            got = runner(dict(zip(names, draw)))
        except Exception as exc:  # noqa: BLE001
            return _export_error(exporter, exc, stage="running it under ONNX Runtime")
        errors.append(_worst(got, want))
    tol = torch.finfo(DTYPE).eps ** 0.5
    if all(err <= tol for err in errors):
        return None
    label, err = next((lb, e) for lb, e in zip(("example", "second"), errors) if e > tol)
    if label == "second" and errors[0] <= tol:
        baked = (f"; the exported graph has no input for {', '.join(dropped)}: its value was "
                 "baked in as a constant") if dropped else (
                 "; a value read from the inputs was baked into the exported graph")
        message = (f"torch.onnx.export ({exporter} exporter) baked a value into the exported "
                   f"graph: the ONNX model agrees with eager on the example inputs but "
                   f"disagrees on new inputs of the same shapes (relative error {err:.2g})"
                   f"{baked}")
    else:
        message = (f"torch.onnx.export ({exporter} exporter): the ONNX model disagrees with "
                   f"eager on the example inputs (relative error {err:.2g})")
    return Finding("onnx-mismatch", "error", message, HINT, NAME,
                   details={"exporter": exporter, "errors": errors, "dropped": dropped,
                            "mismatches": [["output", label, err]]})


def _worst(got: list[Any], want: list[torch.Tensor]) -> float:
    if len(got) != len(want):
        return float("inf")
    # ONNX Runtime runs on the CPU here: compare there (inputs may live on a GPU).
    return max((relative_error(torch.as_tensor(g), w.cpu()) for g, w in zip(got, want)),
               default=0.0)


def _labels(session: Session, pos: list[int]) -> list[str]:
    """Names of the module's tensor inputs (the arguments' labels where they line up)."""
    labels = list(getattr(session.subject.args, "labels", []))
    if pos and max(pos) < len(labels):
        return [labels[i] for i in pos]
    return [f"input {i}" for i in range(len(pos))]


class _Runner:
    def __init__(self, model: bytes) -> None:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        self.session = onnxruntime.InferenceSession(
            model, options, providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.session.get_inputs()}

    def __call__(self, feeds: dict[str, torch.Tensor]) -> list[Any]:
        return self.session.run(None, {k: v.detach().cpu().numpy() for k, v in feeds.items()
                                       if k in self.inputs})


def _export(module: torch.nn.Module, exporter: str, inputs: list[torch.Tensor],
            names: list[str]) -> _Runner:
    loggers = [logging.getLogger(n) for n in ("torch.onnx", "onnxscript", "onnx_ir")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        with quiet_dynamo(), redirect_stdout(io.StringIO()), _quiet_fd2(), \
                warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if exporter == "torchscript":
                buffer = io.BytesIO()
                torch.onnx.export(module, tuple(inputs), buffer, dynamo=False,
                                  input_names=names, verbose=False)
                model = buffer.getvalue()
            else:
                program = torch.onnx.export(module, tuple(inputs), dynamo=True, input_names=names, verbose=False)
                model = program.model_proto.SerializeToString()
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)
    return _Runner(model)


@contextmanager
def _quiet_fd2() -> Iterator[None]:
    """Mute file descriptor 2 while exporting: the TorchScript exporter's C++ side prints a
    traceback-like warning per operator it cannot inline, past ``sys.stderr``."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def _export_error(exporter: str, exc: BaseException, stage: str = "") -> Finding:
    where = user_frame_of(exc)
    at = f" at {where[0]}:{where[1]}" if where else ""
    what = f"{stage} raised" if stage else "raised"
    cause = exc
    while cause.__cause__ is not None and cause.__cause__ is not cause:
        cause = cause.__cause__
    because = f" (cause: {_plain(first_line(cause))})" if cause is not exc else ""
    return Finding(
        "onnx-export-error", "warning",
        f"torch.onnx.export ({exporter} exporter) of a module calling the Function: {what} "
        f"{_plain(first_line(exc))}{because}{at}",
        "ONNX export traces the forward into ONNX operators: it needs torch operations the "
        "exporter knows (no NumPy, no data-dependent Python control flow); register a "
        "symbolic / custom translation for what it cannot export", NAME,
        details={"exporter": exporter, "exception": type(exc).__name__})


def _plain(text: str) -> str:
    """Without terminal colour codes (the dynamo exporter colours its messages)."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)
