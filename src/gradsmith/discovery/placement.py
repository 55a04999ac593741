"""Where zero-config inputs live: the CPU, or a CUDA GPU for code that cannot run on the CPU.

Synthesised inputs are drawn on the CPU (one seeded generator, the same numbers everywhere) and
then placed. The choice is ``GRADSMITH_DEVICE`` (``gradsmith check --device`` sets it for its
workers):

- ``cpu`` or ``cuda`` (``cuda:N``): there, always;
- ``auto`` (the default): a CUDA GPU when one is visible and the user's code defines Triton
  kernels that run natively (not in Triton's interpreter), since those cannot read CPU tensors;
  the CPU otherwise, where float64 finite differences are cheapest and every check applies.
"""

from __future__ import annotations

import os
import sys
from typing import Any

ENV = "GRADSMITH_DEVICE"
CHOICES = ("auto", "cpu", "cuda")


def parse(value: str, name: str = "--device") -> str:
    """``value`` checked as a device choice (``auto``, ``cpu``, ``cuda``, ``cuda:N``)."""
    from gradsmith._errors import GradsmithError

    text = str(value).strip().lower()
    base, _, index = text.partition(":")
    if base in CHOICES and (not index or base == "cuda" and index.isdigit()):
        return text
    raise GradsmithError(f"{name} must be auto, cpu, cuda or cuda:N, got {value!r}; "
                         "for example --device cuda")


def device() -> Any:
    """The device synthesised inputs are placed on, from ``GRADSMITH_DEVICE``."""
    import torch

    choice = parse(os.environ.get(ENV, "auto") or "auto", ENV)
    if choice == "auto":
        return torch.device("cuda" if _native_kernels() else "cpu")
    if choice.startswith("cuda") and not torch.cuda.is_available():
        from gradsmith._errors import GradsmithError

        raise GradsmithError(f"{ENV}={choice}, but no CUDA GPU is visible here (torch "
                             f"{torch.__version__}); use --device cpu or auto")
    return torch.device(choice)


def place(args: list, parts: list[str]) -> tuple[list, list[str]]:
    """``args`` moved to :func:`device` (tensors keep their ``requires_grad``, modules move
    whole); ``parts`` (the Inputs column) says where, when it is not the CPU."""
    import torch

    target = device()
    if target.type == "cpu":
        return args, parts
    placed = []
    for value in args:
        if isinstance(value, torch.Tensor):
            value = value.detach().to(target).requires_grad_(value.requires_grad)
        elif isinstance(value, torch.nn.Module):
            value = value.to(target)
        placed.append(value)
    why = "" if os.environ.get(ENV, "auto") != "auto" else " (Triton kernels, run natively)"
    return placed, [*parts, f"on {target}{why}"]


def uncompiled_note(error: str) -> str:
    """The Inputs column's note for inputs made float32 because a probe in float64 failed with
    ``error`` (``"Type: first line"``), when that was Triton refusing to compile a kernel for
    float64 (a GPU compiler does, e.g. for a float32 accumulator that float64 loads make float64;
    the interpreter does not); else "".

    Example:
        >>> uncompiled_note("ValueError: bad shape")
        ''
    """
    if not str(error).startswith("CompilationError:"):
        return ""
    return "float32: its Triton kernels do not compile for float64 natively"


def with_note(found: Any, note: str) -> Any:
    """``found`` (synthesised inputs) with ``note`` added to its description, if any."""
    from dataclasses import replace

    return replace(found, description=f"{found.description} ({note})") if note else found


def _native_kernels() -> bool:
    # Triton kernels launched natively need the GPU's memory; in the interpreter (no GPU, or
    # TRITON_INTERPRET=1) CPU tensors are what they read.
    if "triton" not in sys.modules:
        return False
    import torch

    if not torch.cuda.is_available():
        return False
    from gradsmith._triton import interpreting

    return not interpreting() and _user_kernels()


#: ``len(sys.modules)`` -> whether user modules then defined kernels: synthesis places inputs
#: for every layout it tries, and the modules loaded change only when something is imported.
_seen: dict[int, bool] = {}


def _user_kernels() -> bool:
    count = len(sys.modules)
    if count not in _seen:
        _seen.clear()
        _seen[count] = _scan()
    return _seen[count]


def _scan() -> bool:
    try:
        from triton.runtime.jit import KernelInterface  # jit, autotune, heuristics
    except ImportError:
        return False
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] in ("torch", "triton", "gradsmith") or module is None:
            continue
        try:
            values = list(vars(module).values())
        except TypeError:
            continue
        if any(isinstance(v, KernelInterface) for v in values):
            return True
    return False
