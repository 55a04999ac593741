"""Replayed random state: every evaluation of user code starts from a fixed seed, and the
caller's random streams are left exactly where they were.

The state is torch's CPU generator, Python's ``random`` and NumPy's legacy global generator
(when NumPy is imported): a forward drawing its dropout mask from ``np.random`` is then as
replayable as one drawing from ``torch.rand``.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

_seed_host = True
# Inside a check (see :func:`host_restored_once`): Python's ``random`` and NumPy are seeded
# before every evaluation but restored only once, at the check's end. Reading and writing
# NumPy's state costs ~0.7 ms, more than a small forward pass, and a check runs thousands.
_host_restored_once = False
# The default device user code had when the check started (None outside a check): user code
# runs with it, gradsmith's own code with the inputs' device (see probe_device).
_user_device: torch.device | None = None


def seeded(seed: int, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` from the random state ``seed``; the caller's state is restored.

    CPU generator only: torch.manual_seed would also (lazily) seed every accelerator backend,
    which costs more than a small forward pass.
    """
    with preserved_global_rng(host=not _host_restored_once):
        if _user_device is not None and torch.get_default_device() != _user_device:
            _set_default_device(_user_device)  # user code sees the default it set
        torch.default_generator.manual_seed(seed)
        if _seed_host:
            random.seed(seed)
            numpy = sys.modules.get("numpy")
            if numpy is not None:
                numpy.random.seed(seed % 2**32)
        return fn(*args, **kwargs)


@contextmanager
def torch_seed_only() -> Iterator[None]:
    """Within, :func:`seeded` replays torch's generator only: a run that then differs from a
    fully seeded one draws from Python's ``random`` or NumPy, which torch.compile and
    torch.export do not replay as eager does (the deployment checks ask this)."""
    global _seed_host
    _seed_host = False
    try:
        yield
    finally:
        _seed_host = True


@contextmanager
def host_restored_once() -> Iterator[None]:
    """Within (one check), :func:`seeded` restores torch's generator after every call but
    Python's ``random`` and NumPy's only once, when this block ends: their states are
    re-seeded before every evaluation, so no evaluation depends on where they were left."""
    global _host_restored_once
    outer = _host_restored_once
    _host_restored_once = True
    try:
        with preserved_global_rng():
            yield
    finally:
        _host_restored_once = outer


@contextmanager
def preserved_global_rng(host: bool = True) -> Iterator[None]:
    """Restore the global random states user code may draw from: torch's CPU generator,
    Python's ``random`` and NumPy's legacy global generator (when NumPy is imported; with
    ``host=False`` torch's only), so a check leaves the caller's random streams exactly where
    they were; and torch's default device, so a ``torch.set_default_device(...)`` in user code
    moves neither the tensors gradsmith makes afterwards (random directions, finite-difference
    steps) nor the caller's default."""
    numpy = sys.modules.get("numpy") if host else None
    states = (torch.get_rng_state(), random.getstate() if host else None,
              numpy.random.get_state() if numpy is not None else None)
    device = torch.get_default_device()
    try:
        yield
    finally:
        if torch.get_default_device() != device:  # torch.set_default_device in user code:
            _set_default_device(device)           # gradsmith's probe tensors must not follow
        torch.set_rng_state(states[0])
        if states[1] is not None:
            random.setstate(states[1])
        if states[2] is not None:
            numpy.random.set_state(states[2])


@contextmanager
def probe_device(args: tuple) -> Iterator[None]:
    """Within a check, torch's default device is the inputs' device, so the tensors gradsmith
    makes (random directions, steps) sit with the inputs even when user code called
    ``torch.set_default_device`` at import; user code, run through :func:`seeded`, still gets
    the default it set. Restored afterwards."""
    global _user_device
    from torch.utils._pytree import tree_leaves

    user = torch.get_default_device()
    device = next((a.device for a in tree_leaves(tuple(args)) if isinstance(a, torch.Tensor)),
                  user)
    outer, _user_device = _user_device, user
    if device != user:
        _set_default_device(device)
    try:
        yield
    finally:
        if torch.get_default_device() != user:
            _set_default_device(user)
        _user_device = outer


def generator(seed: int) -> torch.Generator:
    """A generator seeded with ``seed`` on torch's default device: within a check that is the
    inputs' device (see :func:`probe_device`), so ``torch.randn(shape, generator=...)`` works on
    CUDA inputs too (a CPU generator cannot draw a CUDA tensor)."""
    return torch.Generator(device=torch.get_default_device()).manual_seed(seed)


def _set_default_device(device: torch.device) -> None:
    # the CPU is torch's own default: no device context (it costs every factory call a hop)
    torch.set_default_device(None if device == torch.device("cpu") else device)
