"""The catalog of verified custom ops, in the conventions of ``torch.nn.functional``.

Every op here passes ``gradsmith check`` (estimators against their declared surrogates) and
works with ``torch.func`` (vmap, grad, jvp), ``torch.compile`` and autocast.
"""

# fmt: off
# isort: off
# --- activations, estimators, fused, reductions (catalog part 1) ---
# --- attention, soft sorting, checkpointing, quantization (catalog part 2) ---
# attention + checkpointing (part 2a)
from gradsmith.ops._attention import attention  # noqa: E402,F401
from gradsmith.ops._checkpoint import checkpoint_sequential  # noqa: E402,F401
# end attention + checkpointing
# isort: on
# fmt: on
