"""The catalog of verified custom ops, in the conventions of ``torch.nn.functional``.

Every op here passes ``gradsmith check`` (estimators against their declared surrogates) and
works with ``torch.func`` (vmap, grad, jvp), ``torch.compile`` and autocast. The catalog holds
what PyTorch does not offer, or does measurably better (memory or time, ``gradsmith bench``);
re-implementations of builtins (GELU, SiLU, batch norm, stop-gradient) are teaching examples in
:mod:`gradsmith.examples`, not ops.
"""

# fmt: off
# isort: off
# --- activations, estimators, fused, reductions (catalog part 1) ---
from gradsmith.ops._activations import scaled_sigmoid, swish  # noqa: F401
from gradsmith.ops._estimators import (  # noqa: F401
    grad_reverse, grad_scale, round_ste, sign_ste,
)
from gradsmith.ops._fused import fused_add_relu, fused_linear_relu  # noqa: F401
from gradsmith.ops._gumbel import gumbel_softmax  # noqa: F401
from gradsmith.ops._piecewise import clipped_relu, soft_round, soft_threshold  # noqa: F401
from gradsmith.ops._reductions import logsumexp  # noqa: F401
from gradsmith.ops._reversal import dann_schedule  # noqa: F401
# end catalog part 1
# --- attention, soft sorting, checkpointing, quantization (catalog part 2) ---
# attention + checkpointing (part 2a)
from gradsmith.ops._attention import attention  # noqa: F401
from gradsmith.ops._checkpoint import checkpoint_sequential  # noqa: F401
# end attention + checkpointing
# soft sorting + quantization (part 2b)
from gradsmith.ops._soft_sort import soft_rank, soft_sort  # noqa: F401
from gradsmith.ops._pact import pact, pact_surrogate  # noqa: F401
from gradsmith.ops._quant import fake_quantize_lsq, lsq_init_scale, lsq_surrogate  # noqa: F401
# end soft sorting + quantization
# isort: on
# fmt: on

# Every public name imported above, whichever part of the catalog added it.
__all__ = [n for n in dir() if not n.startswith("_")]
