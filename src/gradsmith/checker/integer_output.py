"""``integer-output-backward``: forward returns only integer tensors while backward returns a
gradient, so the backward the author wrote never runs and no gradient reaches the input.

Autograd treats integer outputs as constants: a quantizer that returns ``(x > 0).long()``
with a straight-through backward trains nothing through it, silently. Backward returning a
gradient for a differentiated input (read from its source, see
:func:`~gradsmith.discovery.integer_outputs.gradient_positions`) is the evidence that a
gradient is meant to flow; an argmax whose backward returns only ``None``, or outputs marked
non-differentiable, mean their integer output and keep the plain ``no-gradient-path``.

Where only a flag value synthesis chose gives integer outputs and another value gives floats
(``dequantize=False`` / ``True``, see :mod:`gradsmith.discovery.integer_flags`), the row is
checked on the floats and the integer case is a warning (:func:`flag_warning`): no user was
shown to call it that way.
"""

from __future__ import annotations

from typing import Any

from gradsmith.checker.report import Finding
from gradsmith.checker.subject import Subject
from gradsmith.discovery.integer_outputs import gradient_positions, only_integer_tensors

__all__ = ["finding", "flag_warning"]


def finding(subject: Subject, out: Any) -> Finding | None:
    """The finding for ``out`` (forward's raw output on the example inputs), or None when some
    output is floating, or backward returns no gradient for a differentiated input."""
    if not only_integer_tensors(out):
        return None
    positions = gradient_positions(subject.target.function_cls)
    args = subject.args
    labels = [d.label for t, d in enumerate(args.inputs) if args.position(t) in positions]
    if not labels:
        return None
    items = out if isinstance(out, (tuple, list)) else (out,)
    dtypes = sorted({str(o.dtype).removeprefix("torch.") for o in items if hasattr(o, "dtype")})
    names = ", ".join(labels)
    return Finding(
        "integer-output-backward", "error",
        f"backward never runs: every output is {'/'.join(dtypes)}, so no gradient reaches "
        f"{names} although backward returns one; a network training through this Function "
        "silently gets none",
        f"return a floating tensor (e.g. `.to({labels[0]}.dtype)`) if a gradient is meant to "
        "flow; if the integer output is meant, return None from backward or "
        "ctx.mark_non_differentiable it", "setup", input=labels[0],
        details={"output_dtypes": dtypes, "inputs": labels})


def flag_warning(said: str) -> Finding:
    """The warning for a synthesised flag value on which every output was an integer tensor
    (``said``: ``"with dequantize=False every output is uint8"``, from
    :attr:`gradsmith.discovery.layout_search.Synthesized.integer_flag`); the row was checked
    at the flag's other value, where forward returns floats."""
    flag = said.removeprefix("with ").split("=", 1)[0]
    return Finding(
        "integer-output-backward", "warning",
        f"{said}, so backward never runs there and a caller passing that value gets no "
        f"gradient; synthesis chose that value itself, so the Function was checked at the "
        f"other value of {flag} named in the inputs, where forward returns floats",
        f"if {flag} at that value is used while training, return a floating tensor there "
        "(or mark the output non-differentiable); otherwise register inputs with the value "
        "callers pass", "setup", input=flag, details={"flag": said})
