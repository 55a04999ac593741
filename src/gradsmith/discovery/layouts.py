"""The shape layouts synthesis tries for a Function's tensor parameters, in order (private)."""

from __future__ import annotations

from gradsmith.discovery.adjoint_pairs import operand_layout
from gradsmith.discovery.grid_samples import grid_layout
from gradsmith.discovery.hints import Hint
from gradsmith.discovery.leading_vectors import leading_layout
from gradsmith.discovery.matrices import square
from gradsmith.discovery.projections import projection_layout
from gradsmith.discovery.slots import Slot

# Functions whose backward calls a function argument try the ODE convention early: a scalar
# time, then the state (``func(t, y)``, an event at time ``t``).
TIME_STATE: tuple[tuple[int, ...], ...] = ((), (3, 4))


# Size map for the "other shapes" variant: equal sizes stay equal (matmul layouts stay valid).
RESIZE = {1: 1, 2: 3, 3: 2, 4: 5, 5: 6, 6: 7, 8: 6}


# Shape layouts for the tensor parameters, in the order tried; shorter lists repeat their last.
LAYOUTS: tuple[tuple[tuple[int, ...], ...], ...] = (
    ((3, 4),),                               # elementwise, reductions
    ((4, 3), (3, 5), (5, 2)),                # matmul chain
    ((4, 3), (5, 3), (5,)),                  # linear: input, weight (out, in), bias
    ((3, 4), ()),                            # tensor and a scalar tensor (scale, step)
    ((2, 3, 4, 5), (3,)),                    # per-channel bias
    ((2, 3, 8), (4, 3, 3), (4,)),            # conv1d: input, weight, bias
    ((2, 3, 6, 6), (4, 3, 3, 3), (4,)),      # conv2d: input, weight, bias
    ((2, 4, 3), (2, 3, 5)),                  # batched matmul
    ((2, 3, 4),),
    ((2, 2, 3, 4),),                         # (batch, heads, length, features)
    ((5,),),
    ((),),
    # Fused kernels (Triton): rows x a power-of-two hidden size; a linear layer (input, weight)
    # before a loss; rotary embeddings (q, k: batch, heads, length, head_dim; cos, sin:
    # 1, length, head_dim); a vector of per-term weights and a scalar (polynomial norms);
    # tensors with per-feature or per-channel vectors (normalisations whose host code checks
    # no shapes: a layout their backward rejects is passed over, see layout_search.first_working).
    ((4, 8),),
    ((4, 8), (16, 8)),
    ((1, 2, 4, 8), (1, 2, 4, 8), (1, 4, 8)),
    ((4, 8), (3,), ()),
    ((2, 3, 4), (4,)),                       # stacked rows and per-feature vectors
    ((2, 2, 4), (2,)),                       # (batch, channels, length), per-channel vectors
    # Filter banks (wavelets, transposed convolutions): one or two signals (batch, channels,
    # length), then filters (1, 1, taps) shorter than them.
    ((2, 3, 8), (1, 1, 4)),
    ((2, 3, 8), (2, 3, 8), (1, 1, 4)),
    # A batch of signals (batch, time) and one value per signal: a compiled per-signal loop
    # (numba's ``for b in prange(B): g = zi[b]``) that reads the others as scalars.
    ((3, 8), (3,)),
    # Several models' logits over one batch of rows (policy, reference, old policy: RL losses)
    # and one value per row (advantages).
    ((3, 8), (3, 8), (3, 8), (3,)),
)


def layouts_for(slots: list[Slot]):
    """Layouts in the order tried: each adjusted to the hints first, then as it is."""
    seen = set()
    operands = operand_layout(slots)  # `matrix @ x` with x listed first: a matrix, not a vector
    grids = grid_layout(slots)  # grid_sample(x, grid): x (N, C, H, W), grid (N, H, W, 2)
    leading = leading_layout(slots)  # w * scale[:, None, None, None]: w (3, 2, 4, 5), scale (3,)
    projected = projection_layout(slots)  # backward: e.mm(fb): e (3, 5), fb (5, 4)
    for layout in [*_built_layouts(slots), *_unit_layouts(slots), *_feature_layouts(slots),
                   *(extra for extra in (operands, grids, leading, projected) if extra)]:
        seen.add(layout)
        yield layout
    for layout in LAYOUTS:
        for candidate in (adjusted(slots, layout), layout):
            if candidate not in seen:
                seen.add(candidate)
                yield candidate


def _built_layouts(slots: list[Slot]):
    """Same-shape tensors whose last dimension is one of the sizes of a tensor in a settings
    object the project built (``params.B`` of shape (D, d): ``theta`` meets it in ``B @
    theta``), rows as many for every tensor (compiled code reads them as one batch)."""
    sizes: list[int] = []
    for s in slots:
        items = getattr(s.value, "items", None) if s.kind == "config" else None
        for v in (items.values() if isinstance(items, dict) else ()):
            sizes += [n for n in getattr(v, "shape", ()) if 1 < n <= 64 and n not in sizes]
    for n in sizes:
        yield ((3, n),)


def _unit_layouts(slots: list[Slot]):
    """A tensor a guard needs size 1 in some dimension (``if s.size(-1) > 1: raise``) with
    every dimension 1 (a single value broadcast against the others: what the guard allows
    whatever the others' shapes), the others on the first layouts; nothing when none is."""
    tensors = [s for s in slots if s.kind in ("tensor", "none")]
    if not any(s.hint is not None and s.hint.unit_dims for s in tensors):
        return
    for base in LAYOUTS[:2]:
        shapes = list(adjusted(slots, base))
        yield tuple((1,) * max(len(shape), 1) if s.hint is not None and s.hint.unit_dims
                    else shape for s, shape in zip(tensors, shapes))


def _feature_layouts(slots: list[Slot]):
    """Per-feature vectors 1-D of the first other tensor's last dimension (rows of features,
    then (batch, length, features)), then of its channels ((batch, channels, length), a
    ``bias.view(1, -1, 1)``); nothing when no slot is a per-feature vector."""
    tensors = [s for s in slots if s.kind in ("tensor", "none")]
    if not any(s.per_feature for s in tensors) or all(s.per_feature for s in tensors):
        return
    for base, axis in ((((3, 4),), -1), (((2, 3, 4),), -1), (((2, 3, 4),), 1)):
        shapes = list(adjusted(slots, base))
        features = next(shape for s, shape in zip(tensors, shapes) if not s.per_feature)
        if len(features) > max(axis, 0):
            yield tuple((features[axis],) if s.per_feature else shape
                        for s, shape in zip(tensors, shapes))


def adjusted(slots: list[Slot], layout) -> tuple[tuple[int, ...], ...]:
    shapes = []
    tensors = [s for s in slots if s.kind in ("tensor", "none")]
    for i, slot in enumerate(tensors):
        shape = list(layout[min(i, len(layout) - 1)])
        hint = slot.hint or Hint()
        while len(shape) < hint.rank_min:
            shape.insert(0, 2)
        if hint.last_dim is not None and shape:
            shape[-1] = hint.last_dim
        if hint.matrix is not None:  # a solve, a Cholesky factor: square matrices
            shape = square(shape)
        for d in hint.unit_dims:  # a guard raises unless this dimension is 1
            if -len(shape) <= d < len(shape):
                shape[d] = 1
        shapes.append(tuple(shape))
    if shapes:
        _related(tensors, shapes)
    return tuple(shapes) or layout


def _related(tensors: list[Slot], shapes: list) -> None:
    """Sizes forward states through another tensor's (:mod:`~gradsmith.discovery.scaled_sizes`):
    ``three == 3`` fixes a dimension, ``2 * cos.shape[-1] <= x.shape[-1]`` makes cos half as
    wide as x, ``sin.shape == (s, d // 2)`` shapes sin like cos. In place."""
    where = {s.name: i for i, s in enumerate(tensors)}
    for i, slot in enumerate(tensors):
        for d, k in (slot.hint.sized_dims if slot.hint else {}).items():
            if d < len(shapes[i]):
                shapes[i] = (*shapes[i][:d], k, *shapes[i][d + 1:])
    for i, slot in enumerate(tensors):
        if slot.hint is None or slot.hint.scaled is None or slot.hint.scaled[0] not in where:
            continue
        other, dx, dp, ratio = slot.hint.scaled
        src, mine = shapes[where[other]], list(shapes[i])
        size = src[dx] * ratio if -len(src) <= dx < 0 else 0
        if -len(mine) <= dp < 0 and size >= 1 and size == int(size):
            mine[dp] = int(size)
            shapes[i] = tuple(mine)
    for i, slot in enumerate(tensors):
        if slot.hint is not None and slot.hint.same_as in where:
            shapes[i] = shapes[where[slot.hint.same_as]]


def broadcast_layout(layout, n: int) -> tuple[tuple[int, ...], ...] | None:
    """A layout with a size-1 leading dimension: on every later tensor shaped like the first
    (broadcast against it; attention's k and v stay alike), else on the only tensor."""
    shapes = [tuple(layout[min(i, len(layout) - 1)]) for i in range(max(n, 1))]
    later = [i for i in range(1, len(shapes))
             if shapes[i] == shapes[0] and len(shapes[i]) >= 1 and shapes[i][0] != 1]
    for i in later:
        shapes[i] = (1, *shapes[i][1:])
    if later:
        return tuple(shapes)
    if n == 1 and len(shapes[0]) >= 2 and shapes[0][0] != 1:
        return ((1, *shapes[0][1:]),)
    return None


def shapes_text(names: list[str], layout) -> str:
    return ", ".join(f"{n} {tuple(layout[min(i, len(layout) - 1)])}"
                     for i, n in enumerate(names))
