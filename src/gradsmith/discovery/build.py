"""Build one argument list from a plan and a layout, and say what it holds (private)."""

from __future__ import annotations

from typing import Any

from gradsmith.discovery.callables import SyntheticFn, pairwise_distance, squared_distance
from gradsmith.discovery.domains import in_domain
from gradsmith.discovery.formula_domains import in_ball
from gradsmith.discovery.integer_kinds import integer_value, total
from gradsmith.discovery.matrices import positive_entries, structured
from gradsmith.discovery.operators import LinearStandIn
from gradsmith.discovery.permutations import permutation
from gradsmith.discovery.placement import place
from gradsmith.discovery.simplexes import on_simplex
from gradsmith.discovery.slots import Slot
from gradsmith.discovery.use_values import from_use

#: An override making an index tensor non-contiguous (a transposed 2-D view, else strided).
NONCONTIGUOUS = "non-contiguous"
#: An override planting the value a tensor is compared with (see :mod:`.sentinels`).
PLANTED = "planted"


def build_args(slots: list[Slot], layout, seed: int, positive: bool = False,
               overrides: dict[str, Any] | None = None, dtype: str = "float64",
               spread: float = 1.0) -> tuple[list, list[str]]:
    """The argument list for one layout; ``overrides`` maps a name to a value, a shape or
    :data:`NONCONTIGUOUS` (an index tensor); ``spread`` scales standard normal values (a
    backward that is infinite outside [-3, 3] is finite on ``randn`` but not on ``3 * randn``)."""
    import torch

    float_dtype = getattr(torch, dtype)
    generator = torch.Generator().manual_seed(seed)
    overrides = overrides or {}
    args: list = []
    parts: list[str] = []
    n_tensors = n_functions = 0
    first_shape: tuple[int, ...] = tuple(layout[0]) if layout else (3, 4)
    modules: list = []
    built: dict[str, Any] = {}  # integer tensors by name: an output_size is their sum

    def tensor(shape, slot: Slot) -> Any:
        if (matrix := _matrix(slot, shape)) is not None:
            value = structured(matrix, tuple(shape), generator, torch.float64, positive)
        elif slot.hint is not None and slot.hint.domain is not None:
            value = in_domain(tuple(shape), slot.hint.domain, generator)
        elif slot.hint is not None and slot.hint.ball:
            value = in_ball(tuple(shape), generator)
        elif slot.hint is not None and slot.hint.simplex:
            value = on_simplex(tuple(shape), generator)
        elif slot.hint is not None and slot.hint.probability:
            value = torch.rand(shape, dtype=torch.float64, generator=generator)
        elif positive:
            value = torch.rand(shape, dtype=torch.float64, generator=generator) + 0.5
        else:
            value = torch.randn(shape, dtype=torch.float64, generator=generator) * spread
        return value.to(float_dtype).requires_grad_(not slot.frozen)

    for slot in slots:
        over = overrides.get(slot.name, _MISSING)
        if slot.kind in ("tensor", "none"):
            shape = layout[min(n_tensors, len(layout) - 1)]
            n_tensors += 1
            if slot.kind == "none" and over is _MISSING or over is None:
                args.append(None)
                parts.append(f"{slot.name}=None")
                continue
            shape = over if isinstance(over, tuple) else shape
            value, why = tensor(shape, slot), _why(slot, positive, shape)
            if over == PLANTED:
                value, why = _planted(value, slot, slots, overrides, why)
            args.append(value)
            parts.append(f"{slot.name}: {dtype} {tuple(shape)}" + why)
        elif slot.kind == "index":
            shape = first_shape[:-1] if len(first_shape) > 1 else (3,)
            high = max(1, min(first_shape) if first_shape else 3)
            if (rows := _rows_of(slot, slots, layout, overrides)) is not None:
                high = max(1, rows)  # features[y]: a row of the tensor it indexes
            if made := integer_value(slot, first_shape, rows, generator, over == NONCONTIGUOUS):
                args.append(built.setdefault(slot.name, made[0]))  # lengths, repeat counts
                parts.append(made[1])
                continue
            if made := permutation(slot, first_shape, over == NONCONTIGUOUS, generator):
                args.append(made[0])  # x[..., idx] there and back: a permutation of that dim
                parts.append(made[1])
                continue
            if over == NONCONTIGUOUS:
                index = _noncontiguous(shape, high, generator)
                args.append(index)
                parts.append(f"{slot.name}: int64 {tuple(index.shape)} in [0, {high}), "
                             f"non-contiguous (strides {index.stride()})")
                continue
            args.append(torch.randint(0, high, shape, generator=generator))
            parts.append(f"{slot.name}: int64 {tuple(shape)} in [0, {high})")
        elif slot.kind == "scalar":
            value = slot.value if over is _MISSING else over
            dtype = torch.float64 if isinstance(value, float) else torch.int64
            t = torch.tensor(value, dtype=dtype)
            args.append(t.requires_grad_() if dtype == torch.float64 else t)
            parts.append(f"{slot.name}: tensor({value!r})")
        elif slot.kind == "module":
            module = synthetic_module(len(modules))
            modules.append(module)
            args.append(module)
            parts.append(f"{slot.name}: {module!r}")
        elif slot.kind == "function":
            fn = SyntheticFn(0.75 + 0.5 * n_functions, bool(slot.value))
            n_functions += 1
            args.append(fn)
            called = " (a plain function: the code calls it)" if slot.hint and \
                slot.hint.kind == "module" else ""
            parts.append(f"{slot.name}: {fn!r}{called}")
        elif slot.kind == "distance":
            fn = squared_distance if slot.value else pairwise_distance
            args.append(fn)
            parts.append(f"{slot.name}: {'squared ' if slot.value else ''}Euclidean distance "
                         "between rows, torch.cdist(a, b)" + (" ** 2" if slot.value else "")
                         + " (its name says a distance)")
        elif slot.kind in ("dtype", "device"):  # built with: the inputs' own
            from gradsmith.discovery.placement import device

            value = float_dtype if slot.kind == "dtype" else device()
            args.append(value)
            parts.append(f"{slot.name}={value!r} (forward builds tensors with it: the inputs' "
                         f"{slot.kind})")
        elif slot.kind == "operator":
            operator = LinearStandIn(slot.value, seed, first_shape, float_dtype)
            args.append(operator)
            parts.append(f"{slot.name}: {operator!r}")
        elif slot.kind in ("config", "sections", "size", "keyed"):
            value, text = from_use(slot, first_shape)
            args.append(value)
            parts.append(text)
        elif slot.kind == "row_size":  # t.view(-1, n): a row of the first tensor
            value = first_shape[-1] if first_shape else 1
            value = value if over is _MISSING else over
            args.append(value)
            parts.append(f"{slot.name}={value!r} (forward views rows of it: the first tensor's "
                         "last size)")
        elif slot.kind == "split":  # args[:n]: n tensors, each shaped like a tensor slot
            count = _split_count(slot, slots, overrides)
            shapes = [layout[min(n_tensors + i, len(layout) - 1)] if layout else (3, 4)
                      for i in range(count)]
            n_tensors += count
            args.extend(tensor(shape, slot) for shape in shapes)
            # args[n:] after a module's inputs: its parameters, as a checkpoint's caller
            # passes them (`apply(func, len(xs), *xs, *func.parameters())`)
            params = [p for m in modules for p in m.parameters()] if slot.hint.split_rest else []
            args.extend(params)
            parts.append(f"*{slot.name}: {count} {dtype} tensors "
                         f"{', '.join(str(tuple(s)) for s in shapes)} (forward splits it at "
                         f"{slot.hint.split_by}: {count} differentiable inputs before it"
                         + (f", then the {len(params)} parameters of the modules" if params
                            else "") + ")")
        elif slot.kind == "params":
            params = [p for m in modules for p in m.parameters()]
            args.extend(params)
            parts.append(f"*{slot.name}: the {len(params)} parameters of the modules")
        else:
            value = slot.value if over is _MISSING else over
            value = value if (summed := total(slot, built)) is None else summed  # output_size
            args.append(value)
            sized = slot.hint is not None and slot.hint.size_term and type(value) is int
            parts.append(f"{slot.name}={value!r}" + (
                " (an int: forward computes a tensor's size with it)" if sized else ""))
    return place(args, parts)


_MISSING = object()


def _split_count(slot: Slot, slots: list[Slot], overrides: dict[str, Any]) -> int:
    """How many tensors a split ``*args`` gets: the int it is split at, as this set has it."""
    at = next(s for s in slots if s.name == slot.hint.split_by)
    value = overrides.get(at.name, at.value)
    return value if type(value) is int and value > 0 else 2


def _planted(value: Any, slot: Slot, slots: list[Slot], overrides: dict[str, Any],
             why: str) -> tuple[Any, str]:
    """``value`` with the number forward compares it with planted, and what the Inputs
    column says about it."""
    from gradsmith.discovery.sentinels import plant, sentinel_value

    values = {s.name: overrides.get(s.name, s.value) for s in slots if s.kind == "value"}
    number = sentinel_value(slot, values)
    if number is None:
        return value, why
    value, count = plant(value, number)
    what = slot.sentinel if isinstance(slot.sentinel, str) else repr(number)
    return value, why + (f" with {number!r} planted at {count} of {value.numel()} elements "
                         f"(forward compares it with {what} for equality)")


def _noncontiguous(shape: tuple[int, ...], high: int, generator: Any) -> Any:
    """Index values in a non-contiguous tensor: a 1-D index becomes a transposed (2, n) one
    (``idx.view(-1)`` then fails, as it does on a transposed index in real use), a 2-D or
    larger one is its own shape, transposed in its last two dimensions."""
    import torch

    shape = (2, *shape) if len(shape) == 1 else shape
    flipped = (*shape[:-2], shape[-1], shape[-2])
    return torch.randint(0, high, flipped, generator=generator).transpose(-1, -2)


def _why(slot: Slot, positive: bool, shape: tuple[int, ...] = ()) -> str:
    """What the Inputs column says about a tensor's values and why they were chosen."""
    text = ""
    if slot.hint is not None and slot.hint.domain is not None:
        low, high = slot.hint.domain
        why = slot.hint.domain_why or ("forward clamps it there before its formula: the "
                                       "domain it is written for")
        text = f" in ({low:g}, {high:g}) ({why})"
    elif slot.hint is not None and slot.hint.ball:
        text = (" rows of norm < 1 (inside the unit ball: the code divides by 1 - |x|^2 of "
                "them)")
    elif slot.hint is not None and slot.hint.simplex:
        text = (" a probability vector (softmax of randn along the last dimension: forward "
                "samples from it)")
    elif slot.hint is not None and slot.hint.probability:
        text = " in [0, 1) (probabilities: forward samples bernoulli of it)"
    elif positive and positive_entries(_matrix(slot, shape)):
        text = " in [0.5, 1.5)"
    elif positive and _matrix(slot, shape) == "diagonal":
        text = " with its diagonal in [0.5, 1.5)"
    if (matrix := _matrix(slot, shape)) == "diagonal":
        text += (" (diagonal: backward returns its gradient as a diagonal matrix; compared "
                 "along diagonal directions)")
    elif matrix is not None:
        text += f" ({_MATRICES[matrix]}: the code's linear algebra or docstring)"
    if slot.frozen:
        text += " (no grad: backward returns None for it)"
    if slot.per_feature and len(shape) == 1:
        text += " (per-feature: the code reduces or broadcasts it over the other dims)"
    return text


def _rows_of(slot: Slot, slots: list[Slot], layout, overrides: dict) -> int | None:
    """The number of rows of the tensor ``slot`` indexes (``hint.rows_of``), else None."""
    target = slot.hint.rows_of if slot.hint is not None else None
    tensors = [s.name for s in slots if s.kind in ("tensor", "none")]
    if target not in tensors or not layout:
        return None
    shape = overrides.get(target)
    if not isinstance(shape, tuple):
        shape = layout[min(tensors.index(target), len(layout) - 1)]
    return shape[0] if shape else None


def _matrix(slot: Slot, shape) -> str | None:
    """The structure the code wants of ``slot`` (``tril``, ``spd``...), when ``shape`` is a
    (batch of) square matrices that can have it."""
    square = len(shape) >= 2 and shape[-1] == shape[-2]
    return slot.hint.matrix if square and slot.hint is not None else None


_MATRICES = {"tril": "lower triangular", "triu": "upper triangular",
             "spd": "symmetric positive definite", "negdef": "symmetric negative definite",
             "symmetric": "symmetric", "square": "square"}


def synthetic_module(index: int = 0) -> Any:
    """A shape-agnostic module with one parameter: ``tanh(y) * weight`` (for ``Fm(x)``)."""
    import torch

    class Scaled(torch.nn.Module):
        def __init__(self, weight: float) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.tensor(weight, dtype=torch.float64))

        def forward(self, y, *args, **kwargs):
            return torch.tanh(y) * self.weight

        def __repr__(self) -> str:
            return f"Module(tanh(y) * {self.weight.item():g})"

    return Scaled(0.75 + 0.5 * index)
