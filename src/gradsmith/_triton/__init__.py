"""Triton kernels on a machine without a GPU: the interpreter, set up before user code loads.

``gradsmith check`` runs user code that may launch Triton kernels. Without a GPU, Triton's own
interpreter (``TRITON_INTERPRET=1``) runs those kernels on CPU tensors, with numpy, so their
Functions can be checked like any other. Two things must happen *before* the user's module is
imported, which is why the isolation worker calls :func:`prepare` first thing:

- ``TRITON_INTERPRET=1`` is read when ``@triton.jit`` decorates a kernel (set later, every launch
  fails with "0 active drivers");
- some kernels bind interpreter-incompatible names at import (``from triton.language.extra.
  libdevice import tanh``), so the shims (:mod:`gradsmith._triton.shims`) must be in place.

The decision is deliberately simple and documented (docs and ``gradsmith check --help``):
the interpreter is switched on when triton is installed, no CUDA device is visible, and the
user has not set ``TRITON_INTERPRET`` themselves. It costs nothing to code without kernels (a
variable in the environment; triton is imported once per run, ~0.3 s), and a text pre-check of
the file would miss kernels in the packages it imports. This module imports neither the
verifier nor the CLI (it sits below the isolation runner).
"""

from __future__ import annotations

import functools
import importlib.util
import os

from gradsmith._requires import on_path

__all__ = ["all_launches", "interpreting", "launches", "prepare", "status", "tf32_launches"]

_ENV = "TRITON_INTERPRET"
_state: dict[str, object] = {}


def prepare() -> bool:
    """Switch Triton's interpreter on (when it applies) and apply the shims; idempotent.

    Returns:
        True when kernels will run interpreted.
    """
    if "interpreting" in _state:
        return bool(_state["interpreting"])
    on = _decide()
    _state["interpreting"] = on
    if on:
        from gradsmith._triton import shims

        _state["shims"] = shims.apply()
    elif importlib.util.find_spec("triton") is not None:
        from gradsmith._triton import native

        _state["native"] = native.count()
    return on


def interpreting() -> bool:
    """Whether Triton kernels launched in this process run in the interpreter."""
    return os.environ.get(_ENV, "").strip().lower() in ("1", "true", "on", "yes") \
        and importlib.util.find_spec("triton") is not None


def launches() -> int:
    """Triton kernel launches the interpreter has run in this process so far (0 when the
    shims are not in place)."""
    if "shims" not in _state:
        return 0
    from gradsmith._triton.shims import LAUNCHES

    return LAUNCHES[0]


def all_launches() -> int:
    """Triton kernel launches in this process so far, interpreted and native (0 when neither
    counter is in place: :func:`prepare` sets them up)."""
    native = 0
    if "native" in _state:
        from gradsmith._triton.native import LAUNCHES

        native = LAUNCHES[0]
    return launches() + native


def tf32_launches(since: int = 0) -> tuple[int, list[str]]:
    """Native launches so far of kernels whose ``tl.dot`` runs in TF32 on a GPU, and the names
    of those launched after the count was ``since`` ((0, []) when native launches are not
    counted: no triton, or interpreted)."""
    if "native" not in _state:
        return 0, []
    from gradsmith._triton.native import TF32, TF32_KERNELS

    return TF32[0], [name for name, last in TF32_KERNELS.items() if last > since]


def status() -> dict[str, object]:
    """What :func:`prepare` did, for reports: ``interpreting``, ``triton`` (version or None),
    ``shims`` (name -> "applied" / "not needed" / why skipped)."""
    return {"interpreting": interpreting(), "triton": _triton_version(),
            "shims": dict(_state.get("shims") or {})}  # type: ignore[call-overload]


@functools.cache
def _triton_version() -> str | None:
    # reading the distribution's metadata costs ~10 ms; the installed version does not change
    if importlib.util.find_spec("triton") is None:
        return None
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("triton")
    except PackageNotFoundError:
        return "unknown"


def _decide() -> bool:
    # The interpreter runs kernels with numpy; without it there is nothing to switch on.
    if importlib.util.find_spec("triton") is None or not on_path("numpy"):
        return False
    if _ENV in os.environ:  # the user's own choice, either way
        return interpreting()
    if _cuda_visible():
        return False
    os.environ[_ENV] = "1"
    return True


def _cuda_visible() -> bool:
    try:
        import torch
    except ImportError:
        return False
    try:
        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 - a broken CUDA setup is no GPU for our purpose
        return False
