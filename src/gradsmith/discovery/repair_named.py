"""A validator's error that names the parameter it rejects, read as what that argument must be
(private).

Libraries check their arguments and say so: ``time_aug must be of type bool, got int
instead``, ``dyadic_order must be an integer or a tuple of length 2``, ``path2.shape must have
length 2 or 3, got length 1``. The name is the validator's, not always forward's: forward may
pass its ``n_jobs`` positionally where the library expects ``time_aug``. :func:`named` follows
the name outwards through the traceback, from the frame that has it as a parameter through each
caller's call (which expression it passed at that position or keyword), to forward's own
parameter, and proposes the change the message states for that argument only. A name no frame
binds to one of forward's arguments proposes nothing. Used by :mod:`.repair_rules`.
"""

from __future__ import annotations

import ast
import re
from types import CodeType, FrameType

from gradsmith.discovery.repair_kinds import Edit, cached
from gradsmith.discovery.repair_lengths import lengths
from gradsmith.discovery.source import failing_calls, parse_code

__all__ = ["named"]

# "NAME must be of type bool", "NAME must be an integer", "NAME must be a bool or None".
_TYPE = re.compile(r"\b([A-Za-z_]\w*) must be (?:of type |an? )?(bool|boolean|int|integer|float)"
                   r"\b")
# "NAME.shape must have length 2 or 3", "NAME must have 3 dimensions", "A and B must be 3D",
# "A, B must all be 2d arrays or all 3d arrays": the names, then what follows "must".
_DIMS = re.compile(r"\b([A-Za-z_]\w*(?:\.shape)?(?:(?:,| and| or) [A-Za-z_]\w*(?:\.shape)?)*)"
                   r" must (.*)")
_RANKS = re.compile(r"^(?:all )?have (?:length|ndim|rank|dimension) ((?:\d(?:, | or |,))*\d)\b"
                    r"|(\d)(?:-?[dD]\b| dimensions\b)")


# A torch.library op's schema check: "torchprobe::log() Expected a value of type 'str' for
# argument 'name' but instead found type 'NoneType'." (corpus 12d held-out: lingua's
# _LogStats); the schema states the kind, and its argument name is the frames' to follow.
# Only a registered op's (``namespace::op()``): a TorchScript function's check reads the same,
# but there the repaired inputs replaced the project's callers' (auto_LiRPA's
# ClampedMultiplication PASSed on them) and the repair's flipped flags gave a false alarm.
_SCHEMA = re.compile(r"\w::\w+\(\) Expected a value of type '(str|int|float|bool|SymInt)' "
                     r"for argument '([A-Za-z_]\w*)'")

# A torch builtin's argument parser: "linalg_svd(): argument 'full_matrices' (position 2) must
# be bool, not Tensor" (corpus 12a dev, spent: yastn's SVDGESDD passes its fullrank_uv there).
# No Python frame binds the name: the failing line's call passes it, by keyword or position.
_BUILTIN = re.compile(r"\w+\(\): argument '([A-Za-z_]\w*)' (?:\(position (\d+)\) )?must be "
                      r"(bool|int|float), not (\w+)")

# "zeros(): argument 'size' (position 1) must be tuple of ints, not Tensor" (or "but found
# element of type Tensor at pos 0" for `zeros((n,))`): a size forward passes; an int, whose
# value is a guess (corpus 12a dev, spent: yastn's kernels take their buffer size Dsize).
_SIZE = re.compile(r"\w+\(\): argument '([A-Za-z_]\w*)' \(position (\d+)\) must be tuple of "
                   r"ints, (?:not (?:Tensor|float)|but found element of type (?:Tensor|float) "
                   r"at pos (\d+))")
# `zeros((2, n))`: "argument 'size' failed to unpack the object at pos 2 with error "type must
# be tuple of ints,but got Tensor"" (pos counts from 1 here; the size is the first argument)
_UNPACKED = re.compile(r"\w+\(\): argument '([A-Za-z_]\w*)' failed to unpack the object at pos "
                       r"(\d+) with error \"type must be tuple of ints,\s*but got (?:Tensor|float)")

_VALUES = {"bool": (False, True), "boolean": (False, True), "int": (2, 1), "integer": (2, 1),
           "float": (1.0,), "str": ("x",), "SymInt": (2, 1)}


def named(exc: BaseException, args: list, said: str) -> list[Edit]:
    """The edits a validator's message asks of the argument it names (see the module)."""
    import torch

    text = str(exc).splitlines()[0] if str(exc) else ""
    out: list[Edit] = []
    if m := _TYPE.search(text):
        i = bound(exc, args, m[1])
        wanted = m[2]
        a = "an" if wanted.startswith("int") else "a"
        if i is not None and not _is(args[i], wanted):
            passed = next(iter(_passed_names(exc, args, m[1], i)), m[1])
            what = f"{m[1]} is {a} {wanted}" if passed == m[1] else (
                f"forward passes {passed} where {m[1]}, {a} {wanted}, stands")
            out += [Edit(i, "number", v, f"{said}: {what}") for v in _VALUES[wanted]]
    if (m := _SCHEMA.search(text)) and (i := bound(exc, args, m[2])) is not None \
            and not _is(args[i], m[1]):
        out += [Edit(i, "number", v, f"{said}: the op's schema types {m[2]} as {m[1]}")
                for v in _VALUES[m[1]]]
    if m := _BUILTIN.search(text):
        out += [Edit(i, "number", v, f"{said}: forward passes it as {m[1]}, {m[3]}", stated=True)
                for i in _at_builtin(exc, args, m[1], int(m[2] or 0)) if not _is(args[i], m[3])
                for v in _VALUES[m[3]]]
    if m := _SIZE.search(text):
        out += [Edit(i, "number", 2, f"{said}: forward passes it as {m[1]}, an int")
                for i in _at_builtin(exc, args, m[1], int(m[2]),
                                     None if m[3] is None else int(m[3]))]
    elif m := _UNPACKED.search(text):
        out += [Edit(i, "number", 2, f"{said}: forward passes it in {m[1]}, an int")
                for i in _at_builtin(exc, args, m[1], 1, int(m[2]) - 1)]
    if (m := _DIMS.search(text)) and (wants := _ranks(m[2])):
        ranked = [(i, args[i].dim()) for name in re.findall(r"[A-Za-z_]\w*", m[1])
                  if name not in ("and", "or", "shape") and (i := bound(exc, args, name))
                  is not None and isinstance(args[i], torch.Tensor)]
        for i, rank in ranked:
            # the rank another named tensor has, when allowed; else the first one allowed
            others = [r for j, r in ranked if j != i and r in wants and r != rank]
            want = others[0] if others else None if rank in wants else wants[0]
            if want is None:
                continue
            shape = tuple(args[i].shape)
            new = (2,) * (want - len(shape)) + shape if want > len(shape) else shape[-want:]
            out.append(Edit(i, "shape", new, f"{said}: {want}-D"))
    return out + lengths(exc, args, said)


def _ranks(rest: str) -> list[int]:
    """The numbers of dimensions what follows "must" allows, in the order written."""
    found = [int(d) for m in _RANKS.finditer(rest) for d in re.findall(r"\d", m[0])]
    return [d for d in dict.fromkeys(found) if 0 < d <= 6]


def _is(value: object, wanted: str) -> bool:
    if wanted in ("bool", "boolean"):
        return isinstance(value, bool)
    if wanted in ("int", "integer", "SymInt"):
        return type(value) is int
    if wanted == "str":
        return isinstance(value, str)
    return type(value) is float


def bound(exc: BaseException, args: list, name: str) -> int | None:
    """Index of the argument of the call ``args`` went to that reached the innermost frame
    with parameter ``name``, or None when no chain of calls shows which."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    at = next((k for k in reversed(range(len(frames)))
               if name in _params(frames[k][0].f_code)), None)
    while at is not None and at > 0:
        frame = frames[at][0]
        if (i := _entry(frame, args, name)) is not None:
            return i
        caller, lineno = frames[at - 1]
        name = _passed(caller, lineno, frame.f_code, name)
        if name is None or name not in _params(caller.f_code):
            return None
        at -= 1
    return None


def _passed_names(exc: BaseException, args: list, name: str, index: int) -> list[str]:
    """Forward's own name for the argument ``index`` when it takes one (``n_jobs``)."""
    tb = exc.__traceback__
    while tb is not None:
        params = [p for p in _params(tb.tb_frame.f_code) if p not in ("ctx", "self", "cls")]
        if len(params) == len(args) and _entry(tb.tb_frame, args, params[index]) == index:
            return [params[index]]
        tb = tb.tb_next
    return []


def _params(code: CodeType) -> tuple[str, ...]:
    return code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]


def _entry(frame: FrameType, args: list, name: str) -> int | None:
    """``name``'s index among ``args`` when ``frame`` is the call ``args`` were passed to
    (forward, after ``ctx`` when it takes one): every argument is its parameter's value."""
    params = [p for p in _params(frame.f_code) if p not in ("ctx", "self", "cls")]
    local = frame.f_locals
    if len(params) != len(args) or name not in params:
        return None
    same = all(local.get(p) is a or (cached(a) and type(local.get(p)) is type(a)
                                      and local.get(p) == a)
               for p, a in zip(params, args, strict=True))
    return params.index(name) if same else None


def _passed(caller: FrameType, lineno: int, callee: CodeType, name: str) -> str | None:
    """The name ``caller`` passed (on its line ``lineno``) as ``callee``'s parameter ``name``,
    or None when that expression is not a plain name or the call cannot be read."""
    if (parsed := parse_code(caller.f_code)) is None:
        return None
    tree, start = parsed
    params = list(_params(callee))
    if params[:1] == ["self"]:
        params = params[1:]
    line = lineno - start + 1
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
             and n.lineno <= line <= (n.end_lineno or n.lineno)]
    for call in sorted(calls, key=lambda c: _named(c) != callee.co_name):
        keywords = {k.arg: k.value for k in call.keywords if k.arg}
        if any(isinstance(a, ast.Starred) for a in call.args) or not set(keywords) <= set(
                params) or len(call.args) > len(params):
            continue
        position = params.index(name)
        expr = keywords.get(name) or (call.args[position] if position < len(call.args)
                                      else None)
        if isinstance(expr, ast.Name):
            return expr.id
    return None


def _named(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


def _at_builtin(exc: BaseException, args: list, name: str, position: int,
                element: int | None = None) -> list[int]:
    """Indices of ``args`` the innermost frame's failing line passes to a call as its keyword
    ``name`` or at ``position`` (1-based, 0: unknown), as a plain name (a builtin has no frame
    of its own, so :func:`bound` cannot follow it); with ``element``, the plain name at that
    place of the tuple or list written there (``zeros((n, 4))``)."""
    if (failing := failing_calls(exc)) is None:
        return []
    frame, calls = failing
    found: list[int] = []
    for call in calls:
        exprs = [k.value for k in call.keywords if k.arg == name]
        if position and not exprs and len(call.args) >= position and not any(
                isinstance(a, ast.Starred) for a in call.args[:position]):
            exprs = [call.args[position - 1]]
        if element is not None:
            exprs = [e.elts[element] for e in exprs if isinstance(e, (ast.Tuple, ast.List))
                     and element < len(e.elts)]
        for expr in exprs:
            if isinstance(expr, ast.Name) and expr.id in frame.f_locals:
                value = frame.f_locals[expr.id]
                found += [i for i, a in enumerate(args) if a is value and not cached(a)]
    return list(dict.fromkeys(found))[:1]
