"""Run a forward (and, where needed, backward) on candidate inputs, catching what fails (private)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gradsmith.discovery.callables import probe_backward
from gradsmith.discovery.elementwise_masks import mask_line


def probe(call: Callable[..., Any], args: list, backward: bool = False) -> bool | str:
    """True: forward ran with finite outputs; False: ran, not finite; str: why it failed.
    ``backward``: backward must run too (function arguments only backward calls)."""
    if backward:
        return probe_backward(call, args)
    # a complex output of real inputs is an output (linalg.eig of a real square matrix): the
    # check reads complex outputs; rejecting it skipped eig-based Functions on every layout
    return probe_failure(call, args, complex_ok=True)[0]


def probe_failure(call: Callable[..., Any], args: list, complex_ok: bool = False
                  ) -> tuple[bool | str, BaseException | None]:
    """:func:`probe` of forward, and the exception forward raised (None when it ran): its
    message and traceback say what to repair (:mod:`~gradsmith.discovery.repair`).
    ``complex_ok``: a complex output counts as a floating-point one (inputs repaired to be
    complex, a non-uniform FFT's values, give one)."""
    import warnings

    import torch

    try:
        with torch.enable_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the check reports the user's warnings, not probes
            out = call(*args)
    except Exception as exc:  # the probe failing is expected; try the next layout
        return f"{type(exc).__name__}: {_first_line(exc)}", exc
    if complex_ok and _has_float_tensor(out, complex_ok=True):
        out = [o.real if isinstance(o, torch.Tensor) and o.is_complex() else o
               for o in (out if isinstance(out, (tuple, list)) else (out,))]
    return _read_output(out), None


def _read_output(out: Any) -> bool | str:
    """True: ``out`` holds finite floating-point tensors; False: not finite; str: why not."""
    if not _has_float_tensor(out):
        return f"forward returned {type(out).__name__}{NOT_FLOATING}"
    try:
        return _all_finite(out)
    except Exception as exc:  # noqa: BLE001 - a tensor subclass whose ops fail (a float
        # SpikeTensor holding bools: isfinite raises "abs_cpu not implemented for 'Bool'"):
        # these inputs give an output the check cannot read; try the next set
        kind = type(out[0] if isinstance(out, (tuple, list)) and out else out).__name__
        return (f"forward's output ({kind}) cannot be tested for finite values: "
                f"{type(exc).__name__}: {_first_line(exc)}")


#: How :func:`probe`'s reason for an output with no floating tensor ends (an integer tensor,
#: a number): :func:`~gradsmith.discovery.layout_search.first_working` then tries flags.
NOT_FLOATING = ", not a floating-point tensor"


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0] if text else ""


def _all_finite(out: Any) -> bool:
    import torch

    items = out if isinstance(out, (tuple, list)) else (out,)
    return all(bool(torch.isfinite(t if t.layout == torch.strided else t.to_dense()).all())
               for t in items if isinstance(t, torch.Tensor) and t.is_floating_point())


def _has_float_tensor(out: Any, complex_ok: bool = False) -> bool:
    import torch

    items = out if isinstance(out, (tuple, list)) else (out,)
    return any(isinstance(t, torch.Tensor) and (t.is_floating_point()
                                                or (complex_ok and t.is_complex()))
               for t in items)


def kernel_backward_misfits(call, args: tuple) -> bool:
    """True when forward launched Triton kernels and backward then fails on these inputs.

    Host code around kernels often checks no shapes: a kernel reads the first ``n`` values of
    a weight of any shape, so forward "runs" on a matmul layout given to a LayerNorm, and its
    backward then returns a correctly sized gradient autograd rejects. A later layout on which
    backward runs is preferred; none: the first layout on which forward ran (the check then
    reports what backward does there). Plain PyTorch validates shapes itself: Functions
    without kernels keep the first layout, as before.
    """
    import torch

    from gradsmith._triton import launches

    before = launches()
    fresh = _fresh(args)
    try:
        with torch.enable_grad():
            out = call(*fresh)
            if launches() == before:
                return False
            _backward(out, fresh)
    except Exception:  # noqa: BLE001 - user code: a misfit, or a bug every layout shows
        return launches() != before
    return False


def backward_error(call, args: tuple) -> str | None:
    """Why backward raises on fresh copies of ``args`` (after forward runs), or None when it
    runs or there is nothing to differentiate. A layout backward rejects is passed over for
    one it accepts: a ``reshape(s.shape)`` written for a scalar step size raises on a (3, 4)
    one, which no real caller passes."""
    import warnings

    import torch

    fresh = _fresh(args)
    with torch.enable_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = call(*fresh)
        except Exception:  # noqa: BLE001 - forward ran on these before: not backward's
            return None
        try:
            _backward(out, fresh)
        except Exception as exc:  # noqa: BLE001 - user code: why, for the report
            if any(m in str(exc) for m in _VALIDATION):
                return None  # backward ran; the check reports the gradients it returned
            said = f"{type(exc).__name__}: {_first_line(exc)}"
            if line := mask_line(exc):  # see elementwise_masks: no guess, harm
                return Raised(f"{said} (at `{line}`)", elementwise_mask=True)
            if COMPLEX_GRADIENT in said and _complex_of_real(out, fresh):
                return Raised(said + COMPLEX_OF_REAL, complex_of_real=True)  # see doubt
            return said
    return None


class Raised(str):
    """A backward error's text (or the doubt phrased from it) that carries, as a flag rather
    than as words a reader must search for, whether backward returned a complex gradient for
    a real input while forward's outputs were complex on the real inputs synthesised: a
    Function written for complex inputs (see :mod:`gradsmith.discovery.doubt`, and
    ``checkrun.task``, where such a doubt also explains the row's grad-dtype-mismatch).

    Example:
        >>> said = Raised("RuntimeError: ...", complex_of_real=True)
        >>> said.complex_of_real, said == "RuntimeError: ...", Raised("x").complex_of_real
        (True, True, False)
    """

    complex_of_real: bool
    elementwise_mask: bool  # see discovery.elementwise_masks

    def __new__(cls, text: str, complex_of_real: bool = False,
                elementwise_mask: bool = False) -> Raised:
        self = super().__new__(cls, text)
        self.complex_of_real = complex_of_real
        self.elementwise_mask = elementwise_mask
        return self


def complex_of_real(said: object) -> bool:
    """Whether ``said`` (an error or a doubt) is a :class:`Raised` with that flag set."""
    return bool(getattr(said, "complex_of_real", False))


# Autograd's error for a complex gradient of a real input, and what backward_error adds to it
# when forward's outputs were complex on the real inputs synthesised (linalg.eig of a real
# matrix, in a Function written for complex ones): see discovery.doubt.
COMPLEX_GRADIENT = "input_is_complex == grad_is_complex"
COMPLEX_OF_REAL = " (forward's outputs are complex on these real inputs)"


def _complex_of_real(out: Any, args: list) -> bool:
    import torch

    outs = out if isinstance(out, (tuple, list)) else (out,)
    return any(isinstance(o, torch.Tensor) and o.is_complex() for o in outs) and not any(
        isinstance(a, torch.Tensor) and a.is_complex() for a in args)


# Autograd's own checks of what backward returned (count, shape, dtype): backward ran, and the
# check's structure findings (grad-shape-mismatch, with the assumed-shape re-check) say more.
_VALIDATION = ("returned an invalid gradient", "returned an incorrect number of gradients")


def _fresh(args) -> list:
    """``args`` with tensors detached and cloned, keeping requires_grad: a probe's own leaves."""
    import torch

    return [a.detach().clone().requires_grad_(a.requires_grad)
            if isinstance(a, torch.Tensor) else a for a in args]


def _backward(out: Any, args: list) -> None:
    """Backward from ``out``'s differentiable tensors (ones as their gradient) to the tensors
    in ``args`` that require grad; nothing when either is empty."""
    import torch

    outs = [o for o in (out if isinstance(out, (tuple, list)) else (out,))
            if isinstance(o, torch.Tensor) and o.requires_grad]
    leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    if outs and leaves:
        torch.autograd.grad(outs, leaves, [torch.ones_like(o) for o in outs], allow_unused=True)


def tried(errors: list[str]) -> str:
    """Forward's errors on the plans tried, for a skip's reason: the first plan's (the kinds the
    code states) and, when a fallback plan's differs, the last one's. A fallback's error alone
    misleads (``'float' object has no attribute 'data'`` where a matrix's shape was wrong).

    Example:
        >>> tried(["RuntimeError: bmm sizes", "AttributeError: 'float' object"])
        "first: RuntimeError: bmm sizes; last: AttributeError: 'float' object"
        >>> tried(["ValueError: mode", "ValueError: mode"]), tried([])
        ('first: ValueError: mode', 'no layout tried')
    """
    if not errors:
        return "no layout tried"
    last = f"; last: {errors[-1]}" if errors[-1] != errors[0] else ""
    return f"first: {errors[0]}{last}"
