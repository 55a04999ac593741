"""Modules wrapping the catalog ops, in the conventions of ``torch.nn``."""

# fmt: off
# isort: off
# --- activations, estimators, fused, reductions (catalog part 1) ---
from gradsmith.ops._activations import Swish  # noqa: F401
from gradsmith.ops._fused import FusedLinearReLU  # noqa: F401
from gradsmith.ops._gumbel import GumbelSoftmax  # noqa: F401
from gradsmith.ops._piecewise import ClippedReLU, SoftRound, SoftThreshold  # noqa: F401
from gradsmith.ops._reversal import GradientReversal  # noqa: F401
# end catalog part 1
# --- attention, soft sorting, checkpointing, quantization (catalog part 2) ---
# attention + checkpointing (part 2a)
from gradsmith.ops._attention import Attention  # noqa: F401
from gradsmith.ops._checkpoint import CheckpointedSequential  # noqa: F401
# end attention + checkpointing
# soft sorting + quantization (part 2b)
from gradsmith.ops._soft_sort import SoftRank, SoftSort  # noqa: F401
from gradsmith.ops._pact import PACT  # noqa: F401
from gradsmith.ops._quant import FakeQuantizeLSQ  # noqa: F401
# end soft sorting + quantization
# isort: on
# fmt: on

# --- deployment: TorchScript refuses clearly, dynamic quantization covers FusedLinearReLU ---
from gradsmith.ops._deploy import quantize_dynamic, refuse_torchscript  # noqa: E402, F401

for _module in [v for v in list(globals().values())
                if isinstance(v, type) and v.__module__.startswith("gradsmith.ops.")]:
    refuse_torchscript(_module)
del refuse_torchscript

# Every public name imported above, whichever part of the catalog added it.
__all__ = [n for n in dir() if not n.startswith("_")]
