"""Rule modules; importing this package registers every rule (one module per rule group)."""

from gradsmith.linter.rules import (  # noqa: F401
    _api,
    _arity,
    _contiguity,
    _ctx_state,
    _dtype,
    _hygiene,
    _inplace,
    _kernels,
    _meta,
    _needs_grad,
    _needs_index,
    _none_when_needed,
    _perf,
    _precomputed,
    _recompute,
    _rng,
    _shape,
    _slots,
    _unread,
    _wrappers,
)
