"""The catalog's Modules under TorchScript and dynamic quantization.

- ``torch.jit.script`` cannot compile a ``torch.autograd.Function`` (every catalog Module is
  built on one), so instead of TorchScript's long compiler trace the Modules refuse with a
  :class:`~gradsmith.GradsmithError` that says what works instead.
- ``torch.ao.quantization.quantize_dynamic`` matches modules by exact type, so a
  :class:`~gradsmith.nn.FusedLinearReLU` (a subclass of ``nn.Linear``) is silently left in
  float. :func:`quantize_dynamic` swaps it for ``Linear`` + ``ReLU`` with the same weights
  first, then quantizes: the quantized model computes ``relu(x W^T + b)`` with an int8
  ``Linear``. (Dynamic quantization is for inference: the fused op's memory-saving backward
  has nothing to save there.)
"""

from __future__ import annotations

import copy
import warnings
from typing import Any

import torch
from torch import nn

from gradsmith._errors import GradsmithError

# Documented deployment gaps of the catalog (``gaps=`` of the registered examples): each a
# cell of the compatibility matrix that is not green, with the reason (docs/ops.md).
ESTIMATOR_EXPORT_GAP = {"export": "estimator: torch.export keeps the forward only, whose gradient "
                                  "is not this one; exported models are for inference"}
NO_GRAPH_EXPORT_GAP = {"export": "forward runs without an autograd graph (in place, to save "
                                 "memory): the exported program is for inference only"}
CHECKPOINT_COMPILE_GAP = {"compile": "saves and restores the RNG state (torch.get_rng_state), "
                                     "which Dynamo does not trace: compile the layers inside"}
#: The deployment checks, for registrations that list their checks explicitly.
DEPLOY_CHECKS = ("custom_op", "precision", "compile", "export", "autocast", "checkpoint",
                 "torch_func")

SCRIPT_HELP = (
    "TorchScript cannot compile a torch.autograd.Function, and {name} is built on one (its "
    "custom forward and backward). What works: eager mode, torch.compile (fullgraph=True), "
    "torch.export (the forward, for inference), and torch.jit.trace inside this Python "
    "process (the traced module calls the Function; it cannot be saved). See docs/ops.md, "
    "section 'Deployment'")


def refuse_torchscript(cls: type) -> type:
    """Make ``torch.jit.script`` on ``cls`` (or a model containing it) raise a clear error.

    ``torch.jit.script`` calls ``__prepare_scriptable__`` on the module and on every submodule
    before compiling, so a model that merely contains the Module is refused the same way.
    """

    def __prepare_scriptable__(self: nn.Module) -> nn.Module:  # noqa: N807 - torch's hook name
        raise GradsmithError(f"torch.jit.script({self!r}): " + SCRIPT_HELP.format(
            name=type(self).__name__))

    cls.__prepare_scriptable__ = __prepare_scriptable__
    return cls


def quantize_dynamic(model: nn.Module, qconfig_spec: Any = None, dtype: torch.dtype = torch.qint8,
                     inplace: bool = False, **kwargs: Any) -> nn.Module:
    """``torch.ao.quantization.quantize_dynamic`` that also quantizes ``FusedLinearReLU``.

    torch's function matches modules by exact type and silently leaves this subclass of
    ``nn.Linear`` in float. Here each :class:`~gradsmith.nn.FusedLinearReLU` is first replaced
    by ``nn.Sequential(nn.Linear, nn.ReLU)`` with the same weights (the same function), then
    torch quantizes the ``Linear`` as usual.

    Args:
        model: the float model (not modified unless ``inplace``).
        qconfig_spec: as for torch (default: its own set, which includes ``nn.Linear``).
        dtype: ``torch.qint8`` (default) or ``torch.float16``.
        inplace: modify ``model`` instead of a copy.
        **kwargs: passed on (``mapping``).

    Returns:
        The quantized model.

    torch 2.13 deprecates ``torch.ao.quantization`` in favour of torchao (its
    ``DeprecationWarning`` passes through); the per-tensor warnings of every quantized weight
    are silenced.

    Example:
        >>> import torch, warnings
        >>> from gradsmith.nn import FusedLinearReLU, quantize_dynamic
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore", DeprecationWarning)
        ...     q = quantize_dynamic(torch.nn.Sequential(FusedLinearReLU(4, 3)))
        >>> q[0][0]._get_name()
        'DynamicQuantizedLinear'
    """
    from gradsmith.ops._fused import FusedLinearReLU

    if not isinstance(model, nn.Module):
        raise GradsmithError(f"quantize_dynamic: model must be a torch.nn.Module, got "
                             f"{type(model).__name__}")
    if not inplace:
        model = copy.deepcopy(model)
    if isinstance(model, FusedLinearReLU):
        raise GradsmithError(
            "quantize_dynamic: pass the model that contains the FusedLinearReLU (e.g. "
            "nn.Sequential(layer)), not the layer itself: it is replaced in its parent")
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, FusedLinearReLU):
                setattr(parent, name, _unfused(child))
    with warnings.catch_warnings():
        # torch 2.13 deprecates torch.ao's quantized tensors (torchao is the successor) on
        # every call; the caller asked for exactly this, and docs/ops.md says so once.
        warnings.filterwarnings("ignore", message=".*quantized tensor creation functions",
                                category=UserWarning)
        return torch.ao.quantization.quantize_dynamic(model, qconfig_spec, dtype=dtype,
                                                      inplace=True, **kwargs)


def _unfused(layer: nn.Linear) -> nn.Module:
    linear = nn.Linear(layer.in_features, layer.out_features, bias=layer.bias is not None,
                       device=layer.weight.device, dtype=layer.weight.dtype)
    linear.load_state_dict(layer.state_dict())
    return nn.Sequential(linear, nn.ReLU())
