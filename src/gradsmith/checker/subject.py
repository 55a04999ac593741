"""The Function under test, evaluated reproducibly on copies of the user's arguments.

Every evaluation starts from the same random state (the CPU generator is re-seeded and restored
afterwards), so a forward that draws dropout masks or Gumbel noise is a deterministic function
of its inputs and finite differences make sense; the caller's global RNG state is left
untouched. Backward runs from a random state of its own (``seed + BACKWARD_SALT``, also
replayed every time), so a backward that draws samples is reproducible too, and a backward that
draws fresh noise never sees, by coincidence, the very numbers forward drew.
"""

from __future__ import annotations

from typing import Any

import torch

from gradsmith.checker.arguments import Arguments, as_real, is_float_like
from gradsmith.checker.inputs import Target, _parameter_names, flatten_outputs
from gradsmith.checker.problem import Problem
from gradsmith.checker.rng import preserved_global_rng, seeded, torch_seed_only

__all__ = ["BACKWARD_SALT", "Subject", "preserved_global_rng", "seeded", "torch_seed_only"]

#: Backward's random state is ``seed + BACKWARD_SALT`` (repro scripts replay the same).
BACKWARD_SALT = 7919


class Subject:
    """User code plus arguments; knows which outputs are differentiable.

    Args:
        target: resolved Function / callable.
        args: the user's positional arguments (never modified).
        seed: random seed replayed before every evaluation.
    """

    def __init__(self, target: Target, args: tuple, seed: int):
        self.target = target
        self.args = Arguments(args, _parameter_names(target, len(args)))
        self.seed = seed
        self.backward_seed = seed + BACKWARD_SALT
        self.dtype: torch.dtype | None = torch.float64
        self.out_pos: list[int] = []
        self.out_labels: list[str] = []
        self.complex_outputs: set[int] = set()

    @property
    def labels(self) -> list[str]:
        return self.args.diff_labels

    def base(self) -> list[torch.Tensor]:
        """Working copies of the differentiable inputs (in the working dtype)."""
        return self.args.working_copies(self.dtype)

    def call(self, diff_values: list[torch.Tensor], seed: int | None = None,
             others: dict[int, torch.Tensor] | None = None, user_dtype: bool = False) -> Any:
        """Run the user's code once, from the replayed random state."""
        args = self.args.build(diff_values, None if user_dtype else self.dtype, others)
        return self.run_built(args, seed)

    def build(self, diff_values: list[torch.Tensor], user_dtype: bool = False) -> tuple:
        """The argument tuple for one call (fresh copies of every other tensor)."""
        return self.args.build(diff_values, None if user_dtype else self.dtype)

    def run_built(self, args: tuple, seed: int | None = None) -> Any:
        """Call the user's code on an already built argument tuple."""
        return seeded(self.seed if seed is None else seed, self.target.call, *args)


    def select(self, out: Any) -> list[torch.Tensor]:
        """The differentiable outputs of a raw output, in a fixed order (complex ones as
        their real views)."""
        flat = flatten_outputs(out)
        return [as_real(flat[i]) for i in self.out_pos]

    def discover_outputs(self, out: Any) -> None:
        """Remember which outputs carry gradients (floating, attached to the graph)."""
        flat = flatten_outputs(out)
        self.out_pos = [i for i, o in enumerate(flat) if is_float_like(o) and o.requires_grad]
        many = len(flat) > 1
        self.out_labels = [f"out[{i}]" if many else "out" for i in self.out_pos]
        self.complex_outputs = {k for k, i in enumerate(self.out_pos) if flat[i].is_complex()}

    def fresh_leaves(self) -> list[torch.Tensor]:
        return [x.requires_grad_(True) for x in self.base()]

    def problem(self) -> Problem:
        """First-order problem: differentiable inputs -> differentiable outputs."""

        def f(xs: list[torch.Tensor], fresh: set[int]) -> list[torch.Tensor]:
            # Clones keep the base point intact even if the forward mutates its inputs, and
            # make inputs non-leaves so mark_dirty Functions can run.
            return self.select(self.call([x if i in fresh else x.clone()
                                          for i, x in enumerate(xs)]))

        return Problem(f, self.base(), self.labels, self.out_labels,
                       accumulate=self.args.params, complex_inputs=self.complex_inputs,
                       complex_outputs=self.complex_outputs, backward_seed=self.backward_seed)

    @property
    def complex_inputs(self) -> set[int]:
        return {t for t, d in enumerate(self.args.inputs) if d.is_complex}
