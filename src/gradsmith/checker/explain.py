"""PyTorch's own autograd errors, explained: the cause in the user's code and the fix.

When user code raises one of autograd's known errors, the finding quotes it, names the line of
user code that raised (or the Function's ``backward`` when autograd itself raised after it
returned) and says what it means here. Several tutorials get these wrong: the count error is
not "Expected to get X gradient(s)", ``save_for_backward`` with an int is not "takes 1
positional argument", modifying ``grad_output`` in place never raises "modified by an inplace
operation" (it silently corrupts other gradients), and ``.expand()`` does not fix a gradient
summed too far.
"""

from __future__ import annotations

import inspect
import os
import re
import traceback
from collections.abc import Callable
from dataclasses import dataclass

import torch

import gradsmith
from gradsmith.discovery.input_free import explanation, input_free


@dataclass(frozen=True)
class Explanation:
    """What a known autograd error means.

    Attributes:
        key: short name of the error kind (``details["cause"]`` of the finding).
        cause: what in the user's code produces it.
        fix: what to change.
        code: a more precise finding code than the caller's, or None to keep it.
    """

    key: str
    cause: str
    fix: str
    code: str | None = None


Rule = Callable[[re.Match, str], Explanation]

# torch's own advice to its developers, in the text of its exceptions: addressed to whoever
# debugs torch, not to a user of gradsmith, whose code raised (a finding never says it).
_BOILERPLATE = re.compile("|".join((
    r"Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace[^\n]*",
    r"You can suppress this exception and fall back to eager by setting:\s*"
    r"import torch\._dynamo\s*torch\._dynamo\.config\.suppress_errors = True",
    r"Please file an issue(?: at \S+| on GitHub| to Github)?[^.\n]*\.?",
    r"If you (?:believe|think) (?:this|it) is a bug[^.\n]*\.?",
    r",? *please report (?:a bug|an issue|this issue|this)(?: to PyTorch)?\.?",
)), re.IGNORECASE)


def strip_boilerplate(text: str) -> str:
    """``text`` without torch's "please file an issue" / "reporting a bug" advice.

    Example:
        >>> strip_boilerplate("Graph break: foo\\n\\nSet TORCHDYNAMO_VERBOSE=1 for the internal "
        ...                   "stack trace (please do this especially if you're reporting a "
        ...                   "bug to PyTorch).\\n")
        'Graph break: foo'
    """
    if not text or not _BOILERPLATE.search(text):
        return text
    stripped = _BOILERPLATE.sub("", text)
    stripped = re.sub(r"[ \t]+\n", "\n", stripped)
    return re.sub(r"\n{3,}", "\n\n", stripped).strip().replace(" .", ".").replace("  ", " ")


def _count(m: re.Match, where: str) -> Explanation:
    want, got = m.group(1), m.group(2)
    return Explanation(
        "incorrect-number-of-gradients",
        f"backward returned {got} value(s), but forward takes {want} argument(s): autograd "
        "needs one gradient per argument of apply (tensors or not, in order)",
        f"return exactly {want} values, using None for non-tensor arguments (flags, shapes, "
        "modules) and for inputs without a gradient", "wrong-grad-count")


def _invalid_shape(m: re.Match, where: str) -> Explanation:
    index, got, want = m.group(1), m.group(2), m.group(3)
    return Explanation(
        "invalid-gradient-shape",
        f"the gradient returned at position {index} has shape [{got}], which is neither the "
        f"input's shape [{want}] nor a shape that input broadcasts to (autograd sums only "
        "a broadcast-shaped gradient down)",
        "give that gradient the input's shape: most often a missing transpose (y = x @ w: "
        "dx = g @ w.T, dw = x.T @ g), a sum over the wrong dimension, or a lost keepdim "
        "(`grad.sum_to_size(x.shape)` reduces broadcast dims; `.expand()` does not repair a "
        "gradient that was summed too far)", "grad-shape-mismatch")


def _invalid_meta(m: re.Match, where: str) -> Explanation:
    kind = "device" if "device" in m.group(0) else "dtype"
    return Explanation(
        f"invalid-gradient-{kind}",
        f"the gradient returned at position {m.group(1)} has the wrong {kind} for its input",
        "create gradient tensors from the input (torch.zeros_like(x), dtype=x.dtype, "
        "device=x.device)", f"grad-{kind}-mismatch")


def _not_a_variable(m: re.Match, where: str) -> Explanation:
    pos = int(m.group(1))
    return Explanation(
        "gradient-for-non-tensor",
        f"backward returned a gradient (not None) at position {pos} (counting from 1), "
        "whose forward argument is not a tensor",
        f"return None at position {pos} (index {pos - 1}) of backward's result",
        "non-tensor-grad")


def _inplace(m: re.Match, where: str) -> Explanation:
    return Explanation(
        "modified-by-inplace",
        f"a tensor autograd saved for backward (output {m.group(1)} of {m.group(2)}: a "
        "custom Function's ctx.save_for_backward, or a builtin op such as exp or sigmoid "
        "that saves its result) was modified in place after it was saved (e.g. `y += 1`, "
        "`y.mul_(2)`, `y[mask] = 0`, an inplace=True activation), so the values its "
        "backward needs are gone (modifying grad_output in place does not raise this; it "
        "silently corrupts other gradients)",
        "use the out-of-place form (`y = y + 1`, `torch.relu(y)`), or modify a clone "
        "(`y = y.clone()` first); if the Function itself is meant to work in place, call "
        "ctx.mark_dirty on the modified input and return it")


def _no_grad_fn(m: re.Match, where: str) -> Explanation:
    if where == "backward":
        return Explanation(
            "no-graph-in-backward",
            "backward calls torch.autograd.grad/backward on a tensor it recomputed, but "
            "autograd runs backward with gradient recording off (unless create_graph=True), "
            "so the recomputed tensor has no graph",
            "wrap the recomputation in `with torch.enable_grad():`, starting from "
            "`x = x.detach().requires_grad_()` (the checkpointing pattern)")
    return Explanation(
        "no-graph",
        "a tensor that should depend on the inputs carries no graph: it was computed under "
        "torch.no_grad(), or from .detach()/.data/.item()/NumPy values",
        "compute it with torch operations on the inputs themselves; inside a Function's "
        "forward, which runs without gradient recording, use `with torch.enable_grad():`")


def _second_time(m: re.Match, where: str) -> Explanation:
    return Explanation(
        "graph-freed",
        "backward differentiates a graph that an earlier backward already freed: typically a "
        "graph built in forward (under enable_grad) and kept on ctx, then consumed by "
        "torch.autograd.grad in backward. It works once, and fails on the next use of that "
        "graph (a second torch.autograd.grad on it, a retain_graph=True user's second "
        "backward)",
        "recompute that graph inside backward (`with torch.enable_grad():`), or pass "
        "retain_graph=True to the inner torch.autograd.grad call")


def _save_non_tensor(m: re.Match, where: str) -> Explanation:
    return Explanation(
        "save-for-backward-non-tensor",
        f"forward passed a value of type {m.group(2)} (argument {m.group(1)}) to "
        "ctx.save_for_backward, which accepts tensors and None only",
        f"store the {m.group(2)} value as a ctx attribute (`ctx.k = k`) and save only tensors")


def _no_backward(m: re.Match, where: str) -> Explanation:
    return Explanation(
        "no-backward",
        "the Function defines no backward (or vjp) staticmethod",
        "define `@staticmethod def backward(ctx, *grad_outputs)` returning one gradient per "
        "forward argument")


def _leaf_inplace(m: re.Match, where: str) -> Explanation:
    return Explanation(
        "leaf-inplace",
        "forward modifies in place an input that is a leaf requiring grad (a parameter or a "
        "user tensor); autograd forbids it, ctx.mark_dirty cannot make it legal",
        "compute out of place (`x = x * 2`) or modify a clone (`x = x.clone(); x.mul_(2)`)")


def _dirty_not_returned(m: re.Match, where: str) -> Explanation:
    return Explanation(
        "dirty-not-returned",
        "ctx.mark_dirty was called on a tensor that forward does not return",
        "return the modified input itself: mark_dirty declares 'this output is that input, "
        "modified in place'")


def _view_inplace(m: re.Match, where: str) -> Explanation:
    return Explanation(
        "custom-view-inplace",
        f"output {m.group(1)} of {m.group(2)} is a view created inside the Function (or an "
        "input returned as-is) and is then modified in place; autograd cannot combine "
        "view+inplace with a custom backward",
        "return a new tensor from forward (`x.clone()`; for an identity forward such as "
        "gradient reversal `x.view_as(x)` is a view too), or do not modify the output in place")


def _none_grad(m: re.Match, where: str) -> Explanation:
    return Explanation(
        "undefined-grad-used",
        "backward received None for an incoming gradient (an output that did not take part "
        "in the loss, with ctx.set_materialize_grads(False)) and computed with it",
        "test `if grad is None:` for each incoming gradient and treat it as zeros (or skip "
        "its contribution), or leave materialize_grads on")


def _matmul(m: re.Match, where: str) -> Explanation:
    return Explanation(
        "matmul-shapes",
        f"a matrix product in {where} has incompatible shapes ({m.group(1)} and "
        f"{m.group(2)}): usually a missing transpose",
        "for y = x @ w: dx = g @ w.T (or w.mT for batches), dw = x.T @ g; check each "
        "operand's shape against the forward's")


def _broadcast(m: re.Match, where: str) -> Explanation:
    return Explanation(
        "size-mismatch",
        f"an elementwise operation in {where} mixes shapes that do not broadcast (sizes "
        f"{m.group(1)} and {m.group(2)} at dimension {m.group(3)}): typically grad_output of a "
        "reduction used without unsqueezing the reduced dimension back, or a gradient of a "
        "broadcast input not summed",
        "unsqueeze grad_output along the reduced dim (`g.unsqueeze(dim)`) before combining it "
        "with the input; sum broadcast gradients with `sum_to_size(x.shape)`")


def _dtype_mix(m: re.Match, where: str) -> Explanation:
    return Explanation(
        "dtype-mix",
        f"{where} mixes dtypes: a tensor created without dtype= (float32 by default) or "
        "converted with .float() meets the float64 input",
        "create tensors from the input (torch.zeros_like(x), dtype=x.dtype) and avoid "
        ".float()/.double() on values that meet the input")


def _numpy_requires_grad(m: re.Match, where: str) -> Explanation:
    return Explanation(
        "numpy-on-graph",
        f"{where} calls .numpy() on a tensor that requires grad: NumPy values carry no graph",
        "use `.detach().numpy()` and accept that the result has no gradient (wrap the NumPy "
        "part in its own Function with an explicit backward, @once_differentiable)")


def _functorch(m: re.Match, where: str) -> Explanation:
    return Explanation(
        "needs-setup-context",
        "torch.func transforms (vmap, grad, jvp) need the Function in the setup_context style",
        "write `forward(*args)` without ctx plus `setup_context(ctx, inputs, output)`")


def _no_triton_driver(m: re.Match, where: str) -> Explanation:
    from gradsmith._triton.late import ADVICE

    return Explanation("triton-no-driver", f"{where} launched Triton kernels, but {ADVICE}",
                       ADVICE.split(": ", 1)[1])


_RULES: tuple[tuple[re.Pattern, Rule], ...] = tuple((re.compile(p), rule) for p, rule in (
    (r"returned an incorrect number of gradients \(expected (\d+), got (\d+)\)", _count),
    (r"invalid gradient at index (\d+) - got \[([^\]]*)\] but expected shape compatible "
     r"with \[([^\]]*)\]", _invalid_shape),
    (r"invalid gradient at index (\d+) - expected (?:dtype|type|device)", _invalid_meta),
    (r"gradient different than None at position (\d+), but the corresponding forward input "
     r"was not a Variable", _not_a_variable),
    (r"modified by an inplace operation: .*?, which is output (\d+) of (\w+)", _inplace),
    (r"element \d+ of tensors does not require grad and does not have a grad_fn", _no_grad_fn),
    (r"Trying to backward through the graph a second time", _second_time),
    (r"save_for_backward can only save variables, but argument (\d+) is of type (\w+)",
     _save_non_tensor),
    (r"must implement either the backward or vjp method", _no_backward),
    (r"a leaf Variable that requires grad (?:is being|has been) used in an in-place", _leaf_inplace),
    (r"marked as dirty during the forward method were not returned as output",
     _dirty_not_returned),
    (r"Output (\d+) of (\w+) is a view and is being modified inplace", _view_inplace),
    (r"unsupported operand type\(s\) for [^:]+: '(?:NoneType)' and|and 'NoneType'|"
     r"'NoneType' object has no attribute", _none_grad),
    (r"mat1 and mat2 shapes cannot be multiplied \((\w+) and (\w+)\)", _matmul),
    (r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) at "
     r"non-singleton dimension (\d+)", _broadcast),
    (r"expected (?:scalar type|m1 and m2 to have the same dtype)|Found dtype \w+ but expected"
     r"|expected both vectors to have same dtype", _dtype_mix),
    (r"Can't call numpy\(\) on Tensor that requires grad", _numpy_requires_grad),
    (r"must override the setup_context staticmethod", _functorch),
    (r"0 active drivers", _no_triton_driver),
))


def explain(exc: BaseException, where: str) -> Explanation | None:
    """The explanation of a known autograd error, or None.

    Args:
        exc: the exception user code (or autograd on its behalf) raised.
        where: ``"forward"``, ``"backward"`` or ``"double backward"``.

    Example:
        >>> e = RuntimeError("function FBackward returned an incorrect number of gradients "
        ...                  "(expected 2, got 1)")
        >>> explain(e, "backward").code
        'wrong-grad-count'
    """
    if where == "forward" and (found := input_free(exc)) is not None:
        return Explanation("input-free", *explanation(found))  # no input reaches the raising call
    text = str(exc)
    for pattern, rule in _RULES:
        m = pattern.search(text)
        if m:
            return rule(m, where)
    return None


_SKIP_DIRS = tuple(os.path.dirname(mod.__file__) + os.sep for mod in (torch, gradsmith))


def user_frame(exc: BaseException, cls: type | None = None, method: str = "backward"
               ) -> dict | None:
    """Where in user code the error arose: the innermost frame outside torch and gradsmith,
    else the definition of ``cls.<method>`` (autograd's own checks run after it returned).

    Returns:
        ``{"file", "line", "function", "code"}`` or None when unknown.
    """
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not f.filename.startswith(_SKIP_DIRS) and not f.filename.startswith("<frozen")]
    if frames:
        f = frames[-1]
        return {"file": f.filename, "line": f.lineno, "function": f.name,
                "code": (f.line or "").strip()}
    cls = cls or _function_named(exc)
    own = cls is not None and any(method in vars(k) for k in cls.__mro__
                                  if k is not torch.autograd.Function
                                  and issubclass(k, torch.autograd.Function))
    fn = inspect.unwrap(getattr(cls, method)) if own else None
    try:
        lines, start = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return None
    offset = next((i for i, line in enumerate(lines) if line.lstrip().startswith("def ")), 0)
    return {"file": inspect.getsourcefile(fn), "line": start + offset, "function": method,
            "code": lines[offset].strip()}


def _function_named(exc: BaseException) -> type | None:
    """The Function class an autograd message names ("function FooBackward returned ..."),
    for a callable target that applies it."""
    m = re.search(r"[Ff]unction (\w+)Backward returned", str(exc))
    if m is None:
        return None
    stack, seen = [torch.autograd.Function], set()
    while stack:
        cls = stack.pop()
        if cls in seen:
            continue
        seen.add(cls)
        if cls.__name__ == m.group(1):
            return cls
        stack.extend(cls.__subclasses__())
    return None


def describe(frame: dict | None) -> str:
    """`` at file.py:12 in backward: `return g @ w` `` (empty when unknown)."""
    if not frame:
        return ""
    code = f": `{frame['code']}`" if frame.get("code") else ""
    return f" (at {os.path.basename(frame['file'])}:{frame['line']} in {frame['function']}{code})"
