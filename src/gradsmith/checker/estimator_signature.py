"""What one input's estimator looks like (:mod:`gradsmith.checker.estimators`), and its
description in words for the ``undeclared-estimator`` finding."""

from __future__ import annotations

from dataclasses import dataclass

from gradsmith.checker import quantized


@dataclass
class Signature:
    """What one input's comparison looks like."""

    t: int
    label: str
    kind: str
    flat: int = 0
    total: int = 0
    scale: float = 1.0
    identity_forward: bool = False
    factor: str | None = None  # the factor as Python source when it is a forward argument
    # The differentiable output this input passes through unchanged (finite differences equal
    # that output's grad_output), and its label when forward has several outputs.
    output: int | None = None
    through: str | None = None
    step: float = 0.0  # quantized: the grid step of backward's derivative, and its levels
    levels: int = 0
    # substituted: (A's label, B's parameter name): the gradient with argument B in place of A
    swap: tuple[str, str] | None = None
    count: int = 0  # truncated: the iteration count forward was given (named by factor)


def describe(sig: Signature) -> str:
    """One input's pattern, in words."""
    if sig.kind == "straight-through":
        return (f"{sig.label}: forward is piecewise constant (finite differences are exactly 0 "
                f"at all {sig.total} elements examined) while backward passes a gradient: a "
                "straight-through estimator (round, sign, floor, quantization)")
    if sig.kind == "straight-through-rescaled":
        return (f"{sig.label}: forward is piecewise constant up to a scale computed from the "
                f"input (moving any of {sig.total} elements examined only rescales the output, "
                "as in alpha * sign(w) with alpha the mean of the kept |w|, or a result rounded "
                "to low precision times a full-precision norm) while backward passes a "
                "gradient: a straight-through estimator that treats the scale as a constant, "
                "or a gradient of another function than the one computed")
    if sig.kind == "straight-through-saturating":
        return (f"{sig.label}: forward is flat at {sig.flat} of {sig.total} elements (a clamp or "
                "saturation) where backward still passes a gradient: a straight-through "
                "clamp, or a forgotten mask")
    if sig.kind == "modified" and sig.through is not None:
        return (f"{sig.label}: forward passes it through unchanged as {sig.through} (finite "
                f"differences equal {sig.through}'s grad_output) while backward returns "
                "something else, no constant multiple of it: its gradient is rerouted or "
                "modified (other outputs' gradients folded in, an implicit-function or "
                "stitching trick, a mask, a clip), which is the gradient of no forward")
    if sig.kind == "modified":
        return (f"{sig.label}: forward is the identity (finite differences equal grad_output) "
                "while backward returns something else, no constant multiple of it: an "
                "intended modification of the gradient (a projection, a mask, a clip), which "
                "is the gradient of no forward")
    if sig.kind == "quantized":
        return (f"{sig.label}: backward is forward's derivative rounded to a grid of step "
                f"{sig.step:.3g} ({sig.levels} levels across the derivative's range, "
                f"{quantized.bits(sig.levels)} bits), within one step of finite differences "
                "everywhere examined: a low-precision derivative by design (a derivative "
                "stored in a few bits to save memory), not a wrong formula; an approximate "
                "gradient, judged as one with approximate=True")
    if sig.kind == "substituted" and sig.swap is not None:
        was, now = sig.swap
        return (f"{sig.label}: backward is the gradient of forward with {now} in place of "
                f"{was} (finite differences of that forward agree with it, element by "
                "element): feedback alignment (a fixed random matrix carries the gradient "
                "back instead of the weight), the gradient of no function of the arguments")
    if sig.kind == "relaxed-abs":
        scaled = "" if abs(sig.scale - 1) <= 1e-6 else f", times {sig.scale:.3g} (a rescaled norm)"
        return (f"{sig.label}: backward is the gradient of forward with each |d| relaxed, "
                f"{sig.factor} in place of sign(d){scaled}: AdderNet's estimator (the "
                "full-precision gradient for the weights, HardTanh for the inputs), the "
                "gradient of no forward (or, as a slip, the derivative of d ** 2 / 2 written for |d|)")
    if sig.kind == "learned-quantizer":
        return (f"{sig.label}: a learned quantization parameter (a step, an offset, a clip) "
                "whose gradient is the straight-through rule of its quantizer, written out in "
                "backward (LSQ, LSQ+, PACT), not the gradient of the rounded forward")
    if sig.kind == "ignored-output":
        return (f"{sig.label}: backward ignores the incoming gradient of {sig.through} (which "
                "forward computes from it) and passes the other outputs' gradient straight "
                "through: a straight-through estimator of those outputs")
    if sig.kind == "truncated":
        return (f"{sig.label}: backward is {sig.scale:.2g} (relative) off forward's gradient at "
                f"{sig.factor}={sig.count} and converges to it as {sig.factor} grows (the "
                "mismatch shrinks at every doubling of the count): the gradient of an "
                f"iteration cut short after {sig.factor} steps (a Newton-Schulz or fixed-point "
                "backward, a truncated series), an approximation by design")
    if sig.kind == "guided":
        return (f"{sig.label}: backward is forward's gradient with every negative incoming "
                "gradient zeroed (guided backpropagation: a saliency rule, the gradient of no "
                "forward)")
    if sig.kind == "no-gradient" and sig.through is not None:
        return (f"{sig.label}: backward returns no gradient although forward passes it "
                f"through as {sig.through}: that output's gradient is dropped or rerouted to "
                "another input")
    if sig.kind == "no-gradient":
        return (f"{sig.label}: backward returns no gradient although forward depends on it "
                "(held constant by the estimator)")
    c = sig.scale
    if sig.factor is not None:
        what = ("gradient reversal" if sig.factor.startswith("-") else "gradient scaling")
        return (f"{sig.label}: backward is exactly {sig.factor} (a forward argument, element "
                f"by element) x the true gradient: {what} by {sig.factor.lstrip('-')}")
    if abs(c + 1) <= 1e-6:
        what = "gradient reversal"
    elif c < 0:
        what = f"gradient reversal with coefficient {-c:.6g}"
    else:
        what = f"gradient scaling by {c:.6g}"
    return f"{sig.label}: backward is exactly {c:.6g} x the true gradient: {what}"
