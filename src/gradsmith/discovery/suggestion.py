"""What to register when synthesis fails: the reason and a ``@gradsmith.example`` line (private)."""

from __future__ import annotations

from typing import Any

from gradsmith.discovery.callables import SyntheticFn
from gradsmith.discovery.hints import Hint
from gradsmith.discovery.layouts import LAYOUTS
from gradsmith.discovery.slots import Slot


def no_inputs_reason(fn: Any, why: str, slots: list[Slot], hints: dict[str, Hint],
                     lead: str = "no inputs could be synthesised") -> str:
    from gradsmith.checker.environment import broken_artifact

    if (path := broken_artifact(why)) is not None:  # the machine's cache, not the inputs
        return (f"the Function could not run: it failed loading {path}, a truncated or "
                "unreadable file in this machine's compile cache (a compile killed while "
                f"writing it leaves it so). Fix: delete {path} (it is rebuilt) or point "
                "TORCHINDUCTOR_CACHE_DIR / TRITON_CACHE_DIR at a fresh folder, then check again")
    from gradsmith.discovery.module_settings import unset_reason

    if (unset := unset_reason(fn, why)) is not None:  # global_args = None: the setup's
        return f"{lead}: {unset}"
    from gradsmith.discovery.library_objects import objects_note

    why += objects_note(fn)  # boundary: shapely.Polygon: nothing synthesised is one
    name = getattr(fn, "__name__", type(fn).__name__)
    where = f"class {name}" if isinstance(fn, type) else f"def {name}"
    return (f"no registered example and {lead}: {why}. Fix: register "
            f"inputs for every argument of forward, e.g. `{example_line(slots)}` above "
            f"`{where}`")


def example_line(slots: list[Slot]) -> str:
    """A ``@gradsmith.example`` line with one entry per forward argument, in order."""
    if not slots:
        return ("@gradsmith.example(lambda: (torch.randn(4, 3, dtype=torch.float64, "
                "requires_grad=True),))")
    entries, names = [], []
    n_tensors = 0
    for slot in slots:
        names.append(("*" if slot.kind == "params" else "") + slot.name)
        if slot.kind in ("tensor", "none"):
            shape = list(LAYOUTS[0][0])
            hint = slot.hint or Hint()
            while len(shape) < hint.rank_min:
                shape.insert(0, 2)
            if hint.last_dim is not None:
                shape[-1] = hint.last_dim
            n_tensors += 1
            entries.append("None" if slot.kind == "none" else
                           f"torch.randn({', '.join(map(str, shape))}, dtype=torch.float64, "
                           "requires_grad=True)")
        elif slot.kind == "index":
            entries.append("torch.randint(0, 3, (3,))")
        elif slot.kind == "scalar":
            entries.append(f"torch.tensor({slot.value!r})")
        elif slot.kind == "module":
            entries.append("torch.nn.Linear(4, 4, dtype=torch.float64)")
        elif slot.kind == "function":
            entries.append(SyntheticFn(0.75, bool(slot.value)).source)
        elif slot.kind == "params":
            entries.append("*module_parameters")
        elif slot.kind == "config" and not isinstance(slot.value, dict):  # builders.Built
            entries.append(f"{slot.value.cls.__name__}(" + ", ".join(
                f"{k}={v!r}" for k, v in slot.value.kwargs.items()) + ")")
        elif slot.kind == "config":
            entries.append("types.SimpleNamespace(" + ", ".join(
                f"{k}={'lambda t: t' if callable(v) else repr(v)}"
                for k, v in slot.value.items()) + ")")
        elif slot.kind in ("dtype", "device"):
            entries.append("torch.float64" if slot.kind == "dtype" else "torch.device('cpu')")
        elif slot.kind in ("operator", "solver"):  # the user's own object: only they have it
            entries.append("...")
        elif slot.kind == "sections":
            entries.append("[1, 3]")
        elif slot.kind == "size":
            entries.append("torch.Size([3, 4])")
        else:
            entries.append(repr(slot.value) if slot.value is not None else "...")
    body = ", ".join(entries) + ("," if len(entries) == 1 else "")
    return f"@gradsmith.example(lambda: ({body}))  # ({', '.join(names)})"
