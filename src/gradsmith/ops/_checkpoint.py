"""Activation checkpointing for sequential layers: ``checkpoint_sequential``,
``CheckpointedSequential``.

Built on ``torch.autograd.graph.saved_tensors_hooks`` rather than a custom Function: the forward
runs with autograd on, but every tensor the graph would save is replaced by its index; the first
time the backward asks for one, the segment is re-run from its input (with the forward's RNG and
autocast state) and the recomputed tensors are handed out by index and released as they are used.
Because the graph is the ordinary one, every tensor the layers use gets its gradient, whether it
is an input, a registered parameter or a tensor captured by a closure, and whether or not ``x``
requires grad. A Function wrapper sees only its explicit inputs: the reentrant
``torch.utils.checkpoint`` silently returns no parameter gradients when ``x`` does not require
grad.

References:
    Chen et al., "Training Deep Nets with Sublinear Memory Cost", 2016.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.checkpoint import get_device_states, set_device_states

from gradsmith._errors import GradsmithError
from gradsmith._example import example
from gradsmith.ops._deploy import CHECKPOINT_COMPILE_GAP
from gradsmith.ops._validate import check_bool, check_devices, check_int, check_tensor

_FN = "checkpoint_sequential"


class _Segment:
    """Pack/unpack hooks of one checkpointed segment and the state needed to re-run it."""

    def __init__(self, run, x: torch.Tensor, preserve_rng_state: bool):
        self.run, self.x = run, x
        self.count = 0
        self.recomputed: dict[int, torch.Tensor] = {}
        self.cpu_rng = torch.get_rng_state() if preserve_rng_state else None
        self.devices, self.device_rng = get_device_states(x) if preserve_rng_state else ([], [])
        self.autocast = [(dt, torch.is_autocast_enabled(dt), torch.get_autocast_dtype(dt))
                         for dt in {"cpu", x.device.type}]

    def pack(self, _tensor: torch.Tensor) -> int:
        self.count += 1
        return self.count - 1

    def unpack(self, index: int) -> torch.Tensor:
        if index not in self.recomputed:  # first use, or a second backward (retain_graph)
            self.recomputed = self._recompute()
            if len(self.recomputed) != self.count:
                raise RuntimeError(
                    f"checkpoint_sequential: the recomputed segment saved "
                    f"{len(self.recomputed)} tensors for backward but the forward saved "
                    f"{self.count}; the layers must run the same operations when re-run (no "
                    f"branching on global state that the recompute does not restore)")
        return self.recomputed.pop(index)

    def _recompute(self) -> dict[int, torch.Tensor]:
        saved: list[torch.Tensor] = []
        x = self.x.detach().requires_grad_(self.x.requires_grad)
        with torch.random.fork_rng(devices=self.devices, enabled=self.cpu_rng is not None):
            if self.cpu_rng is not None:
                torch.set_rng_state(self.cpu_rng)
                set_device_states(self.devices, self.device_rng)
            with torch.enable_grad(), _autocast(self.autocast), \
                    torch.autograd.graph.saved_tensors_hooks(
                        lambda t: saved.append(t.detach()) or len(saved) - 1, _never):
                self.run(x)
        return dict(enumerate(saved))


def _never(_index):  # pragma: no cover - the recompute graph is never backpropagated
    raise RuntimeError("gradsmith checkpoint: the recompute graph is not differentiable")


class _autocast:
    """Re-enter the forward's autocast state for every device type it recorded."""

    def __init__(self, states):
        self.managers = [torch.autocast(dt, dtype=dtype, enabled=on) for dt, on, dtype in states]

    def __enter__(self):
        for m in self.managers:
            m.__enter__()

    def __exit__(self, *exc):
        for m in reversed(self.managers):
            m.__exit__(*exc)


# Under torch.compile a segment runs eagerly (a graph break here): its forward must save the
# same tensors as its eager recompute in backward, which a compiled forward does not.
# torch.compiler.disable imports torch._dynamo when it decorates (0.6 s at import); torch's own
# lazy form defers that to the first call. Older or newer torch without it: the public one.
_eager = getattr(torch, "_disable_dynamo", torch.compiler.disable)


@_eager
def _checkpoint(run, x: torch.Tensor, preserve_rng_state: bool) -> torch.Tensor:
    segment = _Segment(run, x, preserve_rng_state)
    with torch.autograd.graph.saved_tensors_hooks(segment.pack, segment.unpack):
        return run(x)


def _split(layers: list, segments: int) -> list[list]:
    """``segments`` consecutive groups, sizes differing by at most one."""
    size, extra = divmod(len(layers), segments)
    groups, start = [], 0
    for i in range(segments):
        stop = start + size + (1 if i < extra else 0)
        groups.append(layers[start:stop])
        start = stop
    return groups


def _runner(group: list):
    def run(x):
        for layer in group:
            x = layer(x)
        return x
    return run


def _layers(layers) -> list:
    items = list(layers) if isinstance(layers, (nn.Sequential, nn.ModuleList, list, tuple)) \
        else None
    if not items or not all(callable(f) for f in items):
        raise GradsmithError(
            f"{_FN}: layers must be a non-empty nn.Sequential, nn.ModuleList or list of "
            f"callables, got {type(layers).__name__}; wrap a single module as [module]")
    return items


def _check_layer_devices(items, x: torch.Tensor) -> None:
    """x on a real device, and every parameter and buffer of the layers on x's device."""
    named = [("x", x)]
    for i, layer in enumerate(items):
        if isinstance(layer, torch.nn.Module):
            named += [(f"layer {i} ({type(layer).__name__}) {kind} {name!r}", t)
                      for kind, tensors in (("parameter", layer.named_parameters()),
                                            ("buffer", layer.named_buffers()))
                      for name, t in tensors]
    check_devices(_FN, *named)


@example(lambda: ([nn.Linear(3, 4).double(), nn.Tanh(), nn.Linear(4, 2).double()],
                  torch.randn(5, 3, dtype=torch.float64, requires_grad=True), 2), name="mlp",
         gaps=CHECKPOINT_COMPILE_GAP)
def checkpoint_sequential(layers, x, segments=1, preserve_rng_state=True):
    """Run ``layers`` in order on ``x``, keeping only each segment's input for backward.

    The layers are split into ``segments`` consecutive groups; during backward each group is
    re-run from its input, with the forward's RNG state (so dropout masks are identical) and
    autocast state. Unlike ``torch.utils.checkpoint.checkpoint_sequential``, every segment is
    checkpointed, the last one included, so ``segments=1`` recomputes everything.

    Args:
        layers: an ``nn.Sequential``, ``nn.ModuleList`` or list of callables taking one tensor.
        x: the input tensor; it need not require grad (parameters still get gradients).
        segments: number of checkpointed groups, in ``[1, len(layers)]``.
        preserve_rng_state: restore the CPU (and input device's) RNG state before recomputing.
            Generators passed explicitly to layers are not restored.

    Returns:
        The output of the last layer.

    Raises:
        GradsmithError: if ``layers`` is empty or not callables, ``x`` is not a tensor, or
            ``segments`` is not an int in ``[1, len(layers)]``.

    Example:
        >>> net = [torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1)]
        >>> x = torch.randn(3, 4)  # no requires_grad: the weights still get gradients
        >>> checkpoint_sequential(net, x, segments=2).sum().backward()
        >>> net[0].weight.grad is not None
        True
    """
    items = _layers(layers)
    check_tensor(_FN, "x", x)
    _check_layer_devices(items, x)
    segments = check_int(_FN, "segments", segments, min_value=1, max_value=len(items),
                         hint="at most one segment per layer")
    check_bool(_FN, "preserve_rng_state", preserve_rng_state)
    if not torch.is_grad_enabled():
        return _runner(items)(x)
    for group in _split(items, segments):
        x = _checkpoint(_runner(group), x, preserve_rng_state)
    return x


class CheckpointedSequential(nn.Sequential):
    """``nn.Sequential`` whose forward is :func:`checkpoint_sequential`.

    Example:
        >>> net = CheckpointedSequential(torch.nn.Linear(4, 4), torch.nn.GELU(), segments=2)
        >>> net(torch.randn(2, 4)).shape
        torch.Size([2, 4])
    """

    def __init__(self, *layers, segments=1, preserve_rng_state=True):
        super().__init__(*layers)
        _layers(list(layers))
        self.segments = check_int(_FN, "segments", segments, min_value=1,
                                  max_value=len(layers), hint="at most one segment per layer")
        self.preserve_rng_state = check_bool(_FN, "preserve_rng_state", preserve_rng_state)

    def forward(self, x):
        return checkpoint_sequential(self, x, self.segments, self.preserve_rng_state)

    def extra_repr(self) -> str:
        return f"segments={self.segments}, preserve_rng_state={self.preserve_rng_state}"
