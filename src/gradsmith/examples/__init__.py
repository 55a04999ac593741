"""The embedded default of ``gradsmith check``: the seed tutorials' patterns, done right.

Every class here is a small, documented ``torch.autograd.Function`` with registered example
inputs, written in the modern style (``forward`` + ``setup_context``) with a backward that is
itself differentiable, so second derivatives are right. ``gradsmith check`` with no target
verifies all of them (and the op catalog); they double as templates to copy. Where one merely
re-implements a builtin (exp, sigmoid, tanh, matmul), the lint finding GS302 that says so is
silenced with ``# noqa: GS302``: the builtin is the point of comparison.

Modules by theme:

- :mod:`~gradsmith.examples.linear`: linear with optional bias, batched matmul, per-channel and
  general broadcasting bias add, weighted sum, conv1d with stride and padding.
- :mod:`~gradsmith.examples.reductions`: sum, mean and max with ``dim``/``keepdim``, logsumexp.
- :mod:`~gradsmith.examples.activations`: exp, sigmoid and tanh saving their output, clipped
  ReLU, learnable-beta swish, soft threshold, fused add+ReLU and linear+ReLU saving a mask.
- :mod:`~gradsmith.examples.gradient_control`: square with double backward, stop-gradient,
  gradient scale/reversal, straight-through sign estimators (declared with surrogate= or intended=),
  Gumbel-softmax sampling.
- :mod:`~gradsmith.examples.patterns`: branches with ``torch.where``, smooth round, scaled
  sigmoid, and external (non-PyTorch) code with an approximate, once-differentiable gradient.
"""
