"""The user's positional arguments, with every differentiated input located and labelled.

Differentiated inputs are, as in gradcheck, the floating-point or complex tensors that require
grad (all of them when none does), wherever they sit in nested lists, tuples and dicts, plus
the parameters (requiring grad) of ``nn.Module`` arguments: the tutorials' checkpointing
pattern passes a module to ``apply``, and its parameters are inputs of the computation too.

Every evaluation gets fresh copies in the working dtype, so the user's tensors and modules are
never touched. Two representations keep the numerics real-valued:

- a complex input is differentiated through its real view ``(..., 2)`` (real, imaginary),
  rebuilt with ``torch.complex`` for each call: finite differences perturb the real and
  imaginary parts separately and the vector-Jacobian product of the real view is PyTorch's
  (conjugate Wirtinger) gradient, the convention gradcheck uses;
- a module argument is deep-copied once per dtype, then shallow-copied per call with the
  parameter values of that call swapped in, so a backward that recomputes the module (and
  accumulates into its parameters) sees exactly the values being differentiated.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._pytree import tree_flatten_with_path, tree_unflatten

COMPLEX_OF = {torch.float64: torch.complex128, torch.float32: torch.complex64,
              torch.float16: torch.complex32, torch.bfloat16: torch.complex64}


def is_float_like(t: Any) -> bool:
    """A floating-point or complex tensor (what can be differentiated)."""
    return isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())


def working(t: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    """A detached copy of ``t`` in the working dtype (its complex counterpart for complex)."""
    if dtype is None or not is_float_like(t):
        return t.detach().clone()
    return t.detach().to(COMPLEX_OF.get(dtype, dtype) if t.is_complex() else dtype, copy=True)


def as_real(t: torch.Tensor) -> torch.Tensor:
    """Real view ``(..., 2)`` of a complex tensor (differentiable); other tensors unchanged."""
    return torch.view_as_real(t.resolve_conj()) if t.is_complex() else t


def from_real(v: torch.Tensor) -> torch.Tensor:
    """The complex tensor of a real view (a new tensor, differentiable)."""
    return v if v.is_complex() else torch.complex(v[..., 0], v[..., 1])


@dataclass(frozen=True)
class DiffInput:
    """One differentiated input.

    Attributes:
        label: ``x``, ``args[1][0]``, ``run_function.weight``.
        leaf: index of the argument leaf (the tensor, or the module holding the parameter).
        param: parameter name inside the module, or None for a tensor argument.
        is_complex: differentiated through its real view.
    """

    label: str
    leaf: int
    param: str | None = None
    is_complex: bool = False


class Arguments:
    """The user's positional arguments with every tensor located and labelled.

    Args:
        args: the arguments as the user passes them.
        names: the forward's parameter names, one per top-level argument.
    """

    def __init__(self, args: tuple, names: list[str]):
        flat, self._spec = tree_flatten_with_path(tuple(args))
        self._leaves = [leaf for _, leaf in flat]
        self.labels = [_label(path, names) for path, _ in flat]
        self.top_index = [path[0].idx if path else 0 for path, _ in flat]
        self._top_level = [len(path) == 1 for path, _ in flat]
        self.tensor_pos = [i for i, v in enumerate(self._leaves) if isinstance(v, torch.Tensor)]
        floating = [i for i in self.tensor_pos if is_float_like(self._leaves[i])]
        wanted = [i for i in floating if self._leaves[i].requires_grad]
        self.diff_pos = wanted or floating
        # Floating tensors left out because others require grad: treated as constants.
        self.constant_pos = [i for i in floating if i not in self.diff_pos]
        self.constant_labels = [self.labels[i] for i in self.constant_pos]
        self.n_args = len(args)
        self.values = tuple(args)  # as the user passed them (read only)
        self.inputs = [DiffInput(self.labels[i], i, None, self._leaves[i].is_complex())
                       for i in self.diff_pos]
        self._templates: dict[Any, dict[int, torch.nn.Module]] = {}
        self.module_pos = [i for i, v in enumerate(self._leaves)
                           if isinstance(v, torch.nn.Module)]
        # A parameter also passed as a tensor argument (apply(x, Fm, *Fm.parameters())) is one
        # input: the module gets that argument's value in every call.
        self._ties: dict[tuple[int, str], int] = {}
        by_id = {id(self._leaves[i]): i for i in self.tensor_pos}
        for i in self.module_pos:
            for name, p in self._leaves[i].named_parameters():
                if id(p) in by_id:
                    self._ties[(i, name)] = by_id[id(p)]
                elif p.requires_grad and is_float_like(p):
                    self.inputs.append(DiffInput(f"{self.labels[i]}.{name}", i, name,
                                                 p.is_complex()))

    @property
    def originals(self) -> list[torch.Tensor]:
        """The user's differentiated tensors and parameters (read only; never modified)."""
        return [self._original(d) for d in self.inputs]

    @property
    def diff_labels(self) -> list[str]:
        return [d.label for d in self.inputs]

    @property
    def params(self) -> set[int]:
        """Indices (into :attr:`inputs`) of module parameters."""
        return {t for t, d in enumerate(self.inputs) if d.param is not None}

    def position(self, t: int) -> int | None:
        """Position in backward's result of input ``t``'s gradient: its top-level argument
        index when that argument is the tensor itself, else None (nested, or a parameter)."""
        d = self.inputs[t]
        if d.param is not None:
            return None
        return self.top_index[d.leaf] if self._top_level[d.leaf] else None

    def _original(self, d: DiffInput) -> torch.Tensor:
        leaf = self._leaves[d.leaf]
        return leaf.get_parameter(d.param) if d.param is not None else leaf

    def leaf(self, i: int) -> Any:
        """Leaf ``i`` of the flattened arguments, as the check holds it (read only)."""
        return self._leaves[i]

    @contextlib.contextmanager
    def swapped(self, values: dict[int, torch.Tensor]) -> Iterator[None]:
        """Within the block, leaves ``i`` (not differentiated) hold ``values[i]``: the other
        values a pasted declaration line draws for them."""
        saved = list(self._leaves)
        for i, value in values.items():
            self._leaves[i] = value
        try:
            yield
        finally:
            self._leaves[:] = saved

    def working_copies(self, dtype: torch.dtype | None) -> list[torch.Tensor]:
        """Detached copies of the differentiated inputs (real views for complex ones), in
        ``dtype`` (None: the user's dtype)."""
        return [as_real(working(t, dtype)) for t in self.originals]

    def recast(self, dtype: torch.dtype) -> None:
        """From now on, work from copies of the user's floating tensors (and modules) in
        ``dtype`` (for a Function that crashes in the dtype it was given); the user's tensors
        and modules are untouched."""
        for i in self.tensor_pos:
            t = self._leaves[i]
            if is_float_like(t):
                self._leaves[i] = working(t, dtype).requires_grad_(t.requires_grad)
        for i in self.module_pos:
            self._leaves[i] = copy.deepcopy(self._leaves[i]).to(dtype)
        self._templates.clear()

    def build(self, diff_values: list[torch.Tensor], dtype: torch.dtype | None,
              others: dict[int, torch.Tensor] | None = None) -> tuple:
        """The argument tuple with ``diff_values`` in place and fresh copies of other tensors.

        Floating tensors that are not differentiated are converted to ``dtype`` too, so a
        Function mixing them with the differentiated ones sees one consistent dtype; modules
        get a copy per call holding that call's parameter values.
        """
        leaves = list(self._leaves)
        skip = set(self.diff_pos)
        for i in self.tensor_pos:
            if i in skip:
                continue
            leaves[i] = others[i] if others and i in others else working(leaves[i], dtype)
        swaps: dict[int, dict[str, torch.Tensor]] = {i: {} for i in self.module_pos}
        for d, value in zip(self.inputs, diff_values):
            value = from_real(value) if d.is_complex else value
            if d.param is None:
                leaves[d.leaf] = value
            else:
                swaps[d.leaf][d.param] = value
        for (i, name), leaf in self._ties.items():
            swaps[i][name] = leaves[leaf]
        for i in self.module_pos:
            leaves[i] = self._module_for_call(i, dtype, swaps[i])
        return tree_unflatten(leaves, self._spec)

    def _module_for_call(self, i: int, dtype: torch.dtype | None,
                         values: dict[str, torch.Tensor]) -> torch.nn.Module:
        templates = self._templates.setdefault(dtype, {})
        if i not in templates:
            template = copy.deepcopy(self._leaves[i])
            templates[i] = template.to(dtype) if dtype is not None else template
        template = templates[i]
        # Parameters are shared with the template, then replaced: no copy of their data.
        memo = {id(p): p for p in template.parameters()}
        module = copy.deepcopy(template, memo)
        for name, value in values.items():
            owner, _, leaf_name = name.rpartition(".")
            sub = module.get_submodule(owner) if owner else module
            sub._parameters[leaf_name] = value
        return module


def _label(path: tuple, names: list[str]) -> str:
    from torch.utils._pytree import keystr

    head = path[0].idx if path else 0
    base = names[head] if head < len(names) else f"args[{head}]"
    return base + keystr(path[1:])
