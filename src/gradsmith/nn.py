"""Modules wrapping the catalog ops, in the conventions of ``torch.nn``."""

# fmt: off
# isort: off
# --- activations, estimators, fused, reductions (catalog part 1) ---
# --- attention, soft sorting, checkpointing, quantization (catalog part 2) ---
# isort: on
# fmt: on
