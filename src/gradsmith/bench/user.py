"""``gradsmith bench`` for the user's own Functions: which reference, which inputs.

A Function (or a function with a registered example) is measured against, in this order:

1. the ``reference=`` registered with its example (``@gradsmith.example(..., reference=f)``);
2. the autograd of its own forward ("your backward vs autograd's"): the forward body runs as
   ordinary differentiable ops (a modern ``forward(*args)`` is called directly; a classic
   ``forward(ctx, *args)`` gets a stand-in ``ctx`` whose ``save_for_backward`` keeps nothing),
   so autograd records and saves what it needs, as if the Function had not been written;
3. its ``surrogate=`` (straight-through estimators), when the forward is not differentiable
   or its autograd gradient is not what the backward computes (the declared surrogate is).

Inputs come from the registered example, else from input synthesis, repeated along their batch
dimension towards realistic sizes (:mod:`gradsmith.bench.sizes`; the row says so). Each example
gives one case.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from gradsmith.bench.cases import BenchCase
from gradsmith.bench.sizes import grow_batch
from gradsmith.bench.timing import differentiable_loss, join_notes

__all__ = ["autograd_of_forward", "case_for", "same_gradient"]


class _TracingCtx:
    """Stands in for ``ctx`` when a classic ``forward(ctx, *args)`` runs under autograd.

    Autograd records the forward's ops itself, so what the Function would save is not needed:
    ``save_for_backward`` keeps nothing, and the marks are no-ops. Attributes the forward sets
    (``ctx.shape = ...``) land on this object, which is dropped after the call.
    """

    def __init__(self, args: Sequence[Any]) -> None:
        self.needs_input_grad = tuple(isinstance(a, torch.Tensor) and a.requires_grad
                                      for a in args)
        self.materialize_grads = True

    def save_for_backward(self, *tensors: Any) -> None:
        pass

    def save_for_forward(self, *tensors: Any) -> None:
        pass

    def mark_dirty(self, *tensors: Any) -> None:
        pass

    def mark_non_differentiable(self, *tensors: Any) -> None:
        pass

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = value


def _is_modern(cls: type) -> bool:
    from torch.autograd import Function

    return getattr(cls, "setup_context", None) is not getattr(Function, "setup_context", None)


def autograd_of_forward(cls: type) -> Callable[..., Any]:
    """The Function's forward as ordinary differentiable code: autograd does the backward.

    Args:
        cls: a ``torch.autograd.Function`` subclass.

    Returns:
        A callable with ``cls.apply``'s signature.

    Example:
        >>> class Square(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         ctx.save_for_backward(x)
        ...         return x * x
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         (x,) = ctx.saved_tensors
        ...         return 2 * x * g
        >>> autograd_of_forward(Square)(torch.tensor([3.0], requires_grad=True))
        tensor([9.], grad_fn=<MulBackward0>)
    """
    forward = cls.forward
    modern = _is_modern(cls)

    def reference(*args: Any) -> Any:
        with torch.enable_grad():
            return forward(*args) if modern else forward(_TracingCtx(args), *args)

    reference.__name__ = reference.__qualname__ = f"autograd({cls.__name__}.forward)"
    return reference


def same_gradient(fn: Callable[..., Any], reference: Callable[..., Any],
                  make_inputs: Callable[[], Sequence[Any]]) -> bool | None:
    """Whether ``fn`` and ``reference`` give the same values and input gradients (of the sum
    of their outputs) on one set of inputs; ``None`` when either gives no gradient at all."""
    grads = []
    for f in (fn, reference):
        inputs = make_inputs()
        leaves = [a for a in inputs if isinstance(a, torch.Tensor) and a.requires_grad]
        out = f(*inputs)
        loss = differentiable_loss(out)
        if loss is None or not leaves:
            return None
        g = torch.autograd.grad(loss, leaves, allow_unused=True)
        grads.append((loss.detach(), [torch.zeros_like(x) if d is None else d
                                      for x, d in zip(leaves, g)]))
    (loss_a, ga), (loss_b, gb) = grads
    return _close(loss_a, loss_b) and all(_close(a, b) for a, b in zip(ga, gb))


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape:
        return False
    scale = float(b.detach().abs().max()) if b.numel() else 0.0
    return torch.allclose(a.detach().double(), b.detach().double(), rtol=1e-4,
                          atol=1e-6 * max(1.0, scale))


def _template(args: tuple) -> tuple:
    """The example's arguments as leaves; if none requires grad, every floating tensor does
    (the rule of ``gradsmith check``)."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    any_grad = any(t.requires_grad for t in tensors)
    return tuple(a.detach().clone().requires_grad_(a.requires_grad if any_grad
                                                   else a.is_floating_point())
                 if isinstance(a, torch.Tensor) else a for a in args)


def _fresh(template: tuple) -> tuple:
    return tuple(a.detach().clone().requires_grad_(a.requires_grad)
                 if isinstance(a, torch.Tensor) else a for a in template)


def _shape(args: Sequence[Any]) -> str:
    parts = ["x".join(map(str, a.shape)) or "scalar" for a in args
             if isinstance(a, torch.Tensor)]
    return ", ".join(parts) or "no tensors"


def _name(fn: Any) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    code = getattr(fn, "__code__", None)
    if name.endswith("<lambda>") and code is not None:  # say which lambda: file and line
        return f"<lambda> at {code.co_filename.rsplit('/', 1)[-1]}:{code.co_firstlineno}"
    return name


def case_for(obj: Any, label: str, example_index: int | None,
             make_args: Callable[[], tuple] | None = None) -> BenchCase:
    """The benchmark case of a Function class or registered callable on one example.

    Args:
        obj: a ``torch.autograd.Function`` subclass, or a callable with registered examples.
        label: the row name (``ops.py::MaskReLU``).
        example_index: which registered example, or ``None`` for synthesised inputs.
        make_args: the synthesised inputs' factory when ``example_index`` is ``None``.

    Returns:
        A :class:`~gradsmith.bench.cases.BenchCase` (``reference`` ``None`` when there is none).
    """
    from gradsmith._example import examples_of

    is_function = isinstance(obj, type) and issubclass(obj, torch.autograd.Function)
    op = obj.apply if is_function else obj
    notes: list[str] = []
    registered, surrogate = None, None
    if example_index is not None:
        example = examples_of(obj)[example_index]
        make_args = example.make_args
        registered, surrogate = example.reference, example.surrogate
    template = _template(tuple(make_args()))
    if example_index is None:
        template, factor = grow_batch(op, template)
        notes.append(
            f"inputs synthesised from the signature and repeated {factor}x along their first "
            "dimension (register an example with your real sizes for numbers to rely on)"
            if factor > 1 else "inputs synthesised from the signature (tiny shapes: register "
            "an example with realistic sizes for meaningful numbers)")
    make = lambda quick: _fresh(template)  # noqa: E731
    shape = _shape(template)
    reference, ref_name = None, "none"
    if registered is not None:
        reference, ref_name = registered, f"reference={_name(registered)}"
    else:
        own = autograd_of_forward(obj) if is_function else None
        agrees, why = _agrees(op, own, lambda: _fresh(template)) if own is not None \
            else (None, None)
        if own is not None and agrees is not None and (agrees or surrogate is None):
            reference, ref_name = own, "autograd of its forward"
            if not agrees:
                notes.append("the autograd of the forward computes another gradient than this "
                             "backward: run gradsmith check, and register surrogate= or reference=")
        elif surrogate is not None:
            reference, ref_name = surrogate, f"surrogate={_name(surrogate)}"
        else:
            notes.append("no reference: " + (
                f"the forward is not differentiable as ordinary code ({why}), "
                if is_function else "") + "register one with @gradsmith.example(..., "
                "reference=fn)")
    return BenchCase(label, op, reference, ref_name, make, (shape, shape),
                     note=join_notes(notes))


def _agrees(op: Callable[..., Any], own: Callable[..., Any],
            make: Callable[[], Sequence[Any]]) -> tuple[bool | None, str | None]:
    """Whether the op's gradient is the autograd of its forward's; ``(None, why)`` when that
    autograd cannot be taken."""
    try:
        same = same_gradient(op, own, make)
    except Exception as exc:  # noqa: BLE001 - user code (NumPy, in-place on a leaf, no_grad)
        first = (str(exc).strip().splitlines() or [""])[0]
        text = f"{type(exc).__name__}: {first}"
        return None, text if len(text) <= 160 else text[:157] + "..."
    if same is None:
        return None, "its output does not require grad under autograd"
    return same, None


def bench_candidate(candidate: Any, example_index: int | None, options: dict) -> list[dict]:
    """Measure one discovered candidate on one example in every requested mode (a worker task).

    Args:
        candidate: a :class:`gradsmith.discovery.Candidate`.
        example_index: index of its registered example, or ``None`` (synthesised inputs).
        options: ``repeat``, ``warmup``, ``modes``, ``device``, ``peak``.

    Returns:
        One row per mode (see :func:`gradsmith.bench.runner.run_case`); a candidate that cannot
        be imported or given inputs is one row with ``error`` set.
    """
    from gradsmith.bench.runner import run_case
    from gradsmith.discovery import NoInputs, TargetImportError, resolve_ref, synthesize

    label = candidate.ref.label
    if example_index is not None and len(candidate.examples) > 1:
        label = f"{label}[{candidate.examples[example_index]}]"
    try:
        obj = resolve_ref(candidate.ref)
        make_args = None
        if example_index is None:
            found = synthesize(obj)
            if isinstance(found, NoInputs):
                return [error_row(label, f"skipped: {found.reason}")]
            make_args = lambda: found.args  # noqa: E731
        case = case_for(obj, label, example_index, make_args)
    except TargetImportError as exc:
        return [error_row(label, f"import failed: {exc}")]
    except Exception as exc:  # the example factory or the reference probe raised
        return [error_row(label, f"preparing it failed: {type(exc).__name__}: {exc}")]
    return [run_case(case, repeat=options.get("repeat", 10), warmup=options.get("warmup", 2),
                     mode=mode, device=options.get("device", "cpu"),
                     peak=options.get("peak", True))
            for mode in options.get("modes", ("eager",))]


def error_row(label: str, message: str, mode: str = "eager") -> dict:
    """A row for a target that could not be measured at all."""
    return {"op": label, "mode": mode, "reference": "-", "shape": "-",
            "time_ms": {"op": None, "reference": None}, "time_ratio": None,
            "time_ratio_iqr": None, "compile_s": None,
            "saved_bytes": {"op": None, "reference": None}, "saved_ratio": None,
            "peak_bytes": {"op": None, "reference": None}, "peak_ratio": None,
            "error": message, "note": None}
