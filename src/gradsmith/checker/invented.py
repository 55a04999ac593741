"""Errors user code raises on values gradsmith invented: the inputs', not the Function's.

Zero-configuration inputs give an argument the code uses as an object (``nufft_op.op(x)`` in
forward, ``nufft._grad_wrt_data`` in a helper backward calls) a stand-in with the attributes
the code is read to use, each a value of the kind its use asks for. When forward or backward
then raises on a line that uses such a stand-in (an attribute it lacks, a number iterated as
a shape, a float used as a dictionary key), nothing shows the Function is wrong: the object
was invented, and real ones have what the code reads. Such an error is reported as
``invented-input`` (a warning; the verdict is INCOMPLETE and the later checks do not run), not
as ``backward-error``; the same error on a user's own object stays an error.

A stand-in says what it is with a class attribute ``_gradsmith_invented`` (the discovery
package sets it on its invented namespaces and linear operators).
"""

from __future__ import annotations

import linecache
import re
import traceback
from typing import Any

from gradsmith.checker.report import Finding

# Errors about what a value is (an attribute it lacks, a float iterated or used as a key), which
# an invented value of the wrong kind raises; not torch's RuntimeErrors (shapes, dtypes), which
# backward's own arithmetic raises on the tensors it computes with.
_KIND_ERRORS = (AttributeError, TypeError, KeyError, IndexError, ValueError)


def is_invented(value: Any) -> bool:
    """Whether ``value`` is a stand-in zero-configuration inputs invented."""
    return bool(getattr(type(value), "_gradsmith_invented", False))


def synthetic_function(value: Any) -> bool:
    """Whether ``value`` is the function synthesis invented for a function argument (a
    discovery ``SyntheticFn``, known by name: the checker does not import discovery)."""
    kind = type(value)
    return kind.__name__ == "SyntheticFn" and kind.__module__.startswith("gradsmith.")


def invented_cause(exc: BaseException) -> str | None:
    """The stand-in the error arose on, as the name the raising line uses for it (``nufft``),
    or None when the error is not shown to come from one: an ``AttributeError`` raised on a
    stand-in, or an error about a value's kind (``TypeError``, ``KeyError``, ...; not torch's
    ``RuntimeError``) raised in a user frame whose failing line uses a local name bound to a
    stand-in (``for s in nufft.shape``)."""
    from gradsmith.checker.explain import _SKIP_DIRS

    on_stand_in = isinstance(exc, AttributeError) and is_invented(getattr(exc, "obj", None))
    if not isinstance(exc, _KIND_ERRORS):
        return None  # a shape mismatch in torch beside a stand-in is backward's own
    user = [(f, line) for f, line in traceback.walk_tb(exc.__traceback__)
            if not f.f_code.co_filename.startswith(_SKIP_DIRS)
            and not f.f_code.co_filename.startswith("<")]
    if user:
        frame, line = user[-1]
        code = linecache.getline(frame.f_code.co_filename, line)
        for local, value in frame.f_locals.items():
            if is_invented(value) and re.search(rf"\b{re.escape(local)}\b", code):
                return local
    return "an invented object" if on_stand_in else None


def finding(exc: BaseException, where: str, check: str, stand_in: str, message: str,
            details: dict) -> Finding:
    """The ``invented-input`` finding for ``exc``, raised by ``where`` (forward or backward) on
    stand-in ``stand_in``; ``message`` says what raised where."""
    return Finding(
        "invented-input", "warning",
        f"{message}: the line uses {stand_in}, an object gradsmith invented for an argument it "
        "could not build (see the Inputs column); the error is the invented object's, not "
        f"shown to be the Function's, so what the {where} does is unverified and the verdict "
        "is INCOMPLETE",
        "register example inputs with a real object for that argument (@gradsmith.example)",
        check, details={**details, "incomplete": True, "stand_in": stand_in})
