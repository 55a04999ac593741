"""Transform lengths: an int a Fourier transform takes as its ``n`` (private).

``np.fft.rfft(y, n=n, axis=0)`` pads the signal to ``n`` samples or crops it to its first
``n``: a backward written for one case only (gradients for every frame ``t < T``, right when
``T <= n``) is wrong in the other. The stated default (``n=2048``) is far above any
synthesised length, so only the padding case ran. :func:`read_fft_lengths` finds the
parameters forward passes as ``n`` to an FFT (also in the functions of its package it hands
them to) and the axis transformed; the variants then try ``n`` one below the first tensor's
size along that axis, where the transform crops.
"""

from __future__ import annotations

import ast
from typing import Any

from gradsmith.discovery.callees import followed
from gradsmith.discovery.hints import Hint
from gradsmith.discovery.source import parse

_FFTS = {"fft", "rfft", "ifft", "irfft", "hfft", "ihfft"}
_MODULES = {"fft", "np", "numpy", "torch"}


def read_fft_lengths(target: Any, owner: Any, hints: dict[str, Hint]) -> None:
    """Set ``fft_axis`` on the hints of parameters passed as an FFT's length ``n``.

    Example:
        >>> import numpy as np
        >>> def forward(ctx, y, n):
        ...     return np.fft.rfft(y.numpy(), n=n, axis=0)
        >>> hints = {"y": Hint(), "n": Hint()}
        >>> read_fft_lengths(forward, None, hints)
        >>> hints["n"].fft_axis, hints["y"].fft_axis
        (0, None)
    """
    tree = parse(target)
    if tree is None:
        return
    names = {n: n for n in hints}
    _read(tree, names, hints)
    klass = owner if isinstance(owner, type) else None
    for helper, passed in followed(target, tree, names, klass, package=True):
        _read(helper, passed, hints)


def _read(tree: ast.AST, names: dict[str, str], hints: dict[str, Hint]) -> None:
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in _FFTS and _namespace(node.func.value)):
            continue
        length = next((k.value for k in node.keywords if k.arg == "n"),
                      node.args[1] if len(node.args) > 1 else None)
        axis = next((k.value for k in node.keywords if k.arg in ("axis", "dim")),
                    node.args[2] if len(node.args) > 2 else None)
        if not isinstance(length, ast.Name) or length.id not in names:
            continue
        try:
            value = -1 if axis is None else ast.literal_eval(axis)
        except ValueError:
            continue
        if isinstance(value, int) and not isinstance(value, bool):
            hints[names[length.id]].fft_axis = value


def _namespace(node: ast.AST) -> bool:
    """``np.fft``, ``torch.fft``, ``fft``: where the transforms live."""
    if isinstance(node, ast.Attribute):
        return node.attr == "fft" and isinstance(node.value, ast.Name) and \
            node.value.id in _MODULES
    return isinstance(node, ast.Name) and node.id == "fft"
