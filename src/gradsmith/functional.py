"""The catalog of verified custom ops, in the conventions of ``torch.nn.functional``.

Every op here passes ``gradsmith check`` (estimators against their declared surrogates) and
works with ``torch.func`` (vmap, grad, jvp), ``torch.compile`` and autocast.
"""

# fmt: off
# isort: off
# --- activations, estimators, fused, reductions (catalog part 1) ---
# --- attention, soft sorting, checkpointing, quantization (catalog part 2) ---
# isort: on
# fmt: on
