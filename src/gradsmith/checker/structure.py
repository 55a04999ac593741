"""Point 5: what backward returns, before autograd silently fixes it up.

Autograd casts a float32 gradient to a float64 input's dtype without a word (a precision
warning here: the values are judged by the gradients check at the precision backward chose),
and sums a gradient of the broadcast shape down to the input's shape (legal, as in gradcheck:
a warning about the memory it wastes). To see what backward really returns, the check
calls the Function's backward itself: the output's ``grad_fn`` *is* the ctx, and
``grad_fn.apply(*grads)`` runs the user's backward (or vjp) on it without autograd's
validation, with gradient recording off as the engine runs it (``create_graph=False``): a
backward that calls ``.numpy()`` on a saved tensor or a torch function with ``out=`` runs in
training and raises only when differentiated twice (the second-order check's concern).
"""

from __future__ import annotations

from typing import Any

import torch

from gradsmith.checker import unanswered_defaults, undefined_grads
from gradsmith.checker.arguments import is_float_like
from gradsmith.checker.inputs import flatten_outputs
from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session, Skip, UserCodeError, backward_error, forward_error
from gradsmith.checker.sparse_values import as_passed

NAME = "structure"


def raw_backward(session: Session, user_dtype: bool, seed: int | None = None,
                 needs: list[bool] | None = None) -> tuple[tuple, tuple, Any]:
    """Run forward, then the user's backward directly.

    Returns ``(args, raw_grads, grad_outputs)``; ``needs`` selects which differentiable inputs
    require grad (default: all).
    """
    subject = session.subject
    leaves = subject.args.working_copies(None if user_dtype else subject.dtype)
    needs = needs or [True] * len(leaves)
    values = [x.requires_grad_(True).clone() if want else x for x, want in zip(leaves, needs)]
    args = subject.build(values, user_dtype)
    try:
        out = subject.run_built(args)
    except Exception as exc:  # noqa: BLE001
        raise forward_error(exc, NAME, session.function_cls) from None
    flat = flatten_outputs(out)
    node = next((o.grad_fn for o in flat if o is not None and o.grad_fn is not None), None)
    if node is None or not hasattr(node, "_forward_cls"):
        raise Skip("the output has no custom Function node to inspect")
    gen = session.generator(7 + (seed or 0))
    grads = tuple(_grad_for(o, gen) for o in (out if isinstance(out, tuple) else (out,)))
    try:
        # a backward that draws (stochastic rounding of the gradient) draws the same numbers
        # on every call, so the calls that freeze one input compare with the full one
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            torch.manual_seed(session.options.seed + 7)
            raw = node.apply(*grads)
    except Exception as exc:  # noqa: BLE001
        raise backward_error(exc, NAME, session.function_cls) from None
    session.cache["structure:converted"] = _converted(node, args)
    return args, (raw if isinstance(raw, tuple) else (raw,)), grads


def _converted(node: Any, args: tuple) -> set[int]:
    """Positions of differentiable arguments the Function did not receive as they are: an
    ``apply`` override converted them first (phytorch's ``CargsMixin`` makes real inputs
    complex). Autograd fits backward's gradient to the tensor the Function received, and the
    conversion's own backward carries it on (a complex gradient's real part to a real
    input), so the caller's argument says nothing about that gradient's dtype."""
    reached = {id(f) for f, _ in node.next_functions if f is not None}
    return {i for i, a in enumerate(args) if isinstance(a, torch.Tensor)
            and a.grad_fn is not None and id(a.grad_fn) not in reached}


def _grad_for(o: Any, gen: torch.Generator) -> Any:
    if not isinstance(o, torch.Tensor):
        return None
    if not is_float_like(o) or not o.requires_grad:
        return torch.zeros_like(o) if is_float_like(o) else None
    if o.is_complex():
        real = torch.randn((*o.shape, 2), generator=gen, dtype=torch.float64)
        return torch.view_as_complex(real).to(o.dtype)
    return torch.randn(o.shape, generator=gen, dtype=torch.float64).to(o.dtype)


def run(session: Session) -> list[Finding]:
    if session.function_cls is None:
        raise Skip("only for torch.autograd.Function targets (a plain callable's gradients are "
                   "produced by autograd itself)")
    findings = _inspect(session, user_dtype=True)
    originals = session.subject.args.originals
    # The float64 pass only judges a Function that runs in float64 (outputs float64 too); a
    # float32-only kernel fed float32 by its user is not wrong for returning float32.
    runs_in_float64 = session.settings.eps == torch.finfo(torch.float64).eps
    if (session.subject.dtype is not None and runs_in_float64
            and any(t.dtype not in (torch.float64, torch.complex128) for t in originals)):
        seen = {(f.code, f.input) for f in findings}
        findings += [f for f in _inspect(session, user_dtype=False)
                     if (f.code, f.input) not in seen]
    if not any(f.is_error for f in findings):
        findings += undefined_grads.findings(session)
    return findings


def _inspect(session: Session, user_dtype: bool) -> list[Finding]:
    args, raw, _ = raw_backward(session, user_dtype)
    subject = session.subject
    args = as_passed(subject.target, args)  # a sparse operand's shape, not its values'
    n = len(args)
    findings = []
    extra = raw[n:]
    if len(raw) < n or any(g is not None for g in extra):
        findings.append(Finding(
            "wrong-grad-count", "error",
            f"backward returned {len(raw)} value(s) but forward takes {n} input(s) "
            f"({', '.join(_arg_names(subject, n))})",
            f"return exactly {n} values from backward, one per forward input in order, "
            "using None for inputs that need no gradient (non-tensors, flags, shapes)",
            NAME, details={"expected": n, "got": len(raw)}))
        return findings
    names = _arg_names(subject, n)
    converted = session.cache.get("structure:converted", set())
    for i, (arg, g) in enumerate(zip(args, raw)):
        if g is None:
            continue
        label = names[i]
        if not isinstance(arg, torch.Tensor):
            findings.append(Finding(
                "non-tensor-grad", "error",
                f"backward returned a {type(g).__name__} for {label}, which is a "
                f"{type(arg).__name__}, not a tensor",
                f"return None at position {i} of backward's result", NAME, label))
            continue
        if not isinstance(g, torch.Tensor):
            findings.append(Finding(
                "grad-shape-mismatch", "error",
                f"backward returned a {type(g).__name__} for {label}; expected a tensor of "
                f"shape {tuple(arg.shape)} or None", "return a tensor shaped like the input",
                NAME, label))
            continue
        findings += _compare_meta(arg, g, label, i in converted)
    return findings + unanswered_defaults.findings(session.function_cls, n, len(raw), NAME)


def _dtype_finding(arg: torch.Tensor, g: torch.Tensor, label: str) -> Finding:
    """A gradient in another dtype than its input's. Between real floating dtypes autograd
    casts it to the input's: the values are right (the gradients check judges them), only
    their precision is not the input's (a ``.float()`` in backward gives a float64 or
    bfloat16 user float32 values): a warning. Anything else (a complex gradient for a real
    input loses its imaginary part) is an error."""
    details = {"expected": str(arg.dtype), "got": str(g.dtype)}
    fix = ("compute the gradient in the input's dtype: avoid .float()/.double() and tensors "
           "created without dtype=; use torch.empty_like/zeros_like or .to(x.dtype)")
    if arg.is_floating_point() and g.is_floating_point():
        details["precision"] = True
        return Finding(
            "grad-dtype-mismatch", "warning",
            f"gradient for {label} is {g.dtype} but the input is {arg.dtype}: a dtype and "
            f"precision problem, not a wrong gradient. Autograd casts it to {arg.dtype}, so "
            f"{arg.dtype} users get gradients of {g.dtype} precision (a .float() in backward "
            "gives float64 users 7 digits, and makes bfloat16 training pay float32 memory "
            "and a cast)", fix, NAME, label, details)
    return Finding(
        "grad-dtype-mismatch", "error",
        f"gradient for {label} is {g.dtype} but the input is {arg.dtype} (autograd casts "
        "it silently, losing its imaginary part or hiding a hard-coded dtype)",
        fix, NAME, label, details)


def _compare_meta(arg: torch.Tensor, g: torch.Tensor, label: str,
                  converted: bool = False) -> list[Finding]:
    out = []
    if g.shape != arg.shape and _expandable(arg.shape, g.shape):
        # Legal: autograd sums a gradient of the broadcast shape down to the input's shape
        # (gradcheck passes it); the only cost is the larger tensor backward materialises.
        ratio = g.numel() / max(arg.numel(), 1)
        out.append(Finding(
            "broadcast-grad", "warning",
            f"gradient for {label} has the broadcast shape {tuple(g.shape)}, input has shape "
            f"{tuple(arg.shape)}: legal (autograd sums it down, the values are checked by the "
            f"gradients check), but backward materialises {ratio:.3g}x the input's elements",
            f"return `grad.sum_to_size({label}.shape)` (sum over the broadcast dimensions) to "
            "save the memory and the reduction autograd does for you", NAME, label,
            {"expected": list(arg.shape), "got": list(g.shape)}))
    elif g.shape != arg.shape:
        out.append(Finding(
            "grad-shape-mismatch", "error",
            f"gradient for {label} has shape {tuple(g.shape)}, input has shape "
            f"{tuple(arg.shape)} (autograd rejects it: it is not the input's shape nor one "
            "it broadcasts to)",
            "reduce the gradient to the input's shape (sum over broadcast dimensions, "
            "keepdim where the input had size 1) or reshape it", NAME, label,
            {"expected": list(arg.shape), "got": list(g.shape)}))
    if g.dtype != arg.dtype and not converted:  # converted: autograd fits g to what it got
        out.append(_dtype_finding(arg, g, label))
    if g.device != arg.device:
        out.append(Finding(
            "grad-device-mismatch", "error",
            f"gradient for {label} is on {g.device} but the input is on {arg.device}",
            "create gradient tensors with device=x.device (or *_like constructors)",
            NAME, label))
    return out


def _expandable(shape: torch.Size, grad_shape: torch.Size) -> bool:
    try:
        torch.empty(grad_shape, device="meta").sum_to_size(shape)
    except RuntimeError:
        return False
    return True


def _arg_names(subject, n: int) -> list[str]:
    from gradsmith.checker.inputs import _parameter_names

    return _parameter_names(subject.target, n)[:n]


__all__ = ["NAME", "raw_backward", "run", "UserCodeError"]
