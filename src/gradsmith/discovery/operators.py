"""Linear operators: arguments whose methods apply a map and its adjoint (private).

Physics and solver Functions take an object rather than a tensor: ``A(x)`` in forward and
``A.adjoint(g)`` in backward, ``physics.A`` / ``physics.A_adjoint`` handed to a solver,
``op.mv`` / ``op.rmv``. Their backward is right only when the adjoint really is the map's
transpose, so a stand-in must keep that pairing, and a backward that applies the map where its
adjoint belongs must still fail. Read, never run, from forward, setup_context and backward
(through ``ctx.op = op`` and ``op = ctx.op``): an argument is a linear operator when two of
the names used on it form a map/adjoint pair (``f``/``f_adjoint``, ``f``/``fT``, ``f``/``f_H``,
``f``/``rf`` as in ``mv``/``rmv``; the object called, or its ``.forward`` as a module's, and
``.adjoint``/``.T``/``.H``/``.t``). Two function arguments that are a map and its adjoint
are read in :mod:`~gradsmith.discovery.function_pairs`.

:class:`LinearStandIn` then applies a seeded random square matrix ``M`` (not symmetric, so
map and adjoint differ) to the last dimension: the map is ``x @ M.T``, its adjoint
``y @ M``; names joining the two (``A_A_adjoint``, ``A_adjoint_A``) compose them; attributes
named as shapes (``in_shape``, ``out_shape``, ``img_size``) are the per-sample shape, the
first tensor's shape after its batch and channel dimensions. The two halves of an adjoint
pair are two stand-ins of the same seed, one applying ``M.T``, the other ``M``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field, replace
from typing import Any

from gradsmith.discovery.operator_shapes import applied_whole
from gradsmith.discovery.source import method_trees, read_parameter, stored_on_ctx

# Not a bare "t": star/start would pair up.
_ADJOINT_SUFFIXES = ("_adjoint", "_adj", "_T", "T", "_H", "H", "_transpose", "_t")
_SELF_ADJOINTS = {"adjoint", "adj", "T", "H", "t", "transpose", "rmatvec"}
_SHAPE_WORDS = {"shape", "size"}
_PRODUCTS = ("mv", "mm", "matvec", "matmul", "vec")  # rmv, rmatvec: the adjoint's product


@dataclass(frozen=True)
class Operator:
    """What the code uses of one operator argument: ``maps`` name -> ``"f"``/``"a"`` letters
    applied right to left (``"fa"``: the map of the adjoint), ``shapes`` the attributes read
    as a shape, ``called`` whether the object itself is the map."""

    maps: dict[str, str] = field(default_factory=dict)
    shapes: tuple[str, ...] = ()
    called: bool = False
    #: one half of an adjoint pair of function arguments: ``"f"`` the map, ``"a"`` its
    #: adjoint, applied when called; ``partner`` the other half's argument
    half: str = ""
    partner: str = ""
    #: one callable that is both halves, told apart by a keyword (``matmul(x,
    #: transpose=True)`` in forward, ``matmul(g, transpose=False)`` in backward): ``flag`` the
    #: keyword, ``flag_map`` its value when the call is the map (see
    #: :mod:`~gradsmith.discovery.matrix_maps`)
    flag: str = ""
    flag_map: bool = True
    #: names that give the map's matrix itself, called with no argument (``""``: the object
    #: called, ``dequantize()``; else a method, ``layer.dequantize()``)
    gives: tuple[str, ...] = ()
    #: forward applies it to a whole tensor argument (``op(x, out=y)``, not ``op(x[i])``):
    #: its shape attributes are that tensor's whole shape, not the per-sample one
    whole: bool = False


def linear_operators(owner: Any, names: list[str]) -> dict[str, Operator]:
    """Each argument of ``owner``'s forward that the code uses as a linear operator.

    Example:
        >>> import torch
        >>> class Project(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x, op):
        ...         ctx.op = op
        ...         return op(x)
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         op = ctx.op
        ...         return op.adjoint(g), None
        >>> linear_operators(Project, ["x", "op"])
        {'op': Operator(maps={'adjoint': 'a'}, shapes=(), called=True, half='', partner='', flag='', flag_map=True, gives=(), whole=False)}
    """
    if not isinstance(owner, type):
        return {}
    used: dict[str, set[str]] = {n: set() for n in names}
    called: set[str] = set()
    stored: dict[str, str] = {}
    for method, tree in method_trees(owner).items():
        if method != "backward":
            stored.update(stored_on_ctx(tree, names))
        local = {n: n for n in names} if method == "forward" else {}
        _read(tree, local, stored, used, called)
    whole = applied_whole(method_trees(owner).get("forward"), names)
    found = {}
    for name in names:
        op = _pairing(used[name], name in called)
        if op is not None:
            found[name] = replace(op, whole=True) if name in whole and op.shapes else op
    return found


def _read(tree: ast.AST, local: dict[str, str], stored: dict[str, str],
          used: dict[str, set[str]], called: set[str]) -> None:
    def param(node: ast.AST) -> str | None:
        return read_parameter(node, local, stored)

    for node in ast.walk(tree):  # op = ctx.op
        if isinstance(node, ast.Assign) and param(node.value) is not None:
            for target in node.targets:
                if isinstance(target, ast.Name):
                    local[target.id] = param(node.value)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and (name := param(node.value)) is not None:
            used[name].add(node.attr)
        elif isinstance(node, ast.Call) and (name := param(node.func)) is not None:
            called.add(name)


def _pairing(attrs: set[str], called: bool) -> Operator | None:
    """The operator ``attrs`` describe, or None when no map/adjoint pair is among them."""
    maps: dict[str, str] = {}
    if "forward" in attrs and attrs & _SELF_ADJOINTS:  # op.forward(x), op.adjoint(g): a module's
        called = True
        maps["forward"] = "f"
    for name in attrs:
        for suffix in _ADJOINT_SUFFIXES:
            if name.endswith(suffix) and name[:-len(suffix)] in attrs:
                maps.setdefault(name[:-len(suffix)], "f")
                maps[name] = "a"
        if name.startswith("r") and name[1:] in attrs and name[1:].endswith(_PRODUCTS):  # mv/rmv
            maps.setdefault(name[1:], "f")
            maps[name] = "a"
    if called:
        for name in attrs & _SELF_ADJOINTS:
            maps[name] = "a"
    if not maps:
        return None
    for name in attrs - set(maps):  # A_A_adjoint, A_adjoint_A: compositions
        letters = _composed(name, maps)
        if letters is not None:
            maps[name] = letters
    shapes = tuple(sorted(a for a in attrs - set(maps)
                          if set(a.lower().split("_")) & _SHAPE_WORDS))
    return Operator(dict(sorted(maps.items())), shapes, called)


def _composed(name: str, maps: dict[str, str]) -> str | None:
    """``A_adjoint_A`` -> ``"af"`` (the adjoint of the map), when ``name`` joins two of
    ``maps``'s single names with ``_``."""
    for first, a in maps.items():
        for second, b in maps.items():
            if len(a) == len(b) == 1 and name == f"{first}_{second}":
                return a + b
    return None


class LinearStandIn:
    """A linear map ``x @ M.T`` on the last dimension and its adjoint ``y @ M``, ``M`` a seeded
    random square matrix per size (built on first use); see :class:`Operator`.

    Example:
        >>> import torch
        >>> op = LinearStandIn(Operator({"A": "f", "A_adjoint": "a"}), 0, (2, 3, 4))
        >>> x, y = torch.randn(4, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
        >>> bool(torch.isclose(op.A(x) @ y, x @ op.A_adjoint(y)))
        True
    """

    _gradsmith_invented = True  # an error on it is not the Function's (checker.invented)

    def __init__(self, spec: Operator, seed: int, first_shape: tuple[int, ...],
                 dtype: Any = None, lead: int | None = None) -> None:
        self._spec, self._seed, self._first = spec, seed, tuple(first_shape)
        self._dtype = dtype  # of a given matrix: the inputs' float dtype
        # leading dimensions of the first tensor that are not the per-sample shape (None:
        # batch and channel of a 3-D or larger tensor); another guess is another value
        self._lead = 0 if lead is None and spec.whole else lead
        self._matrices: dict[int, Any] = {}

    def _matrix(self, n: int, like: Any) -> Any:
        import torch

        if n not in self._matrices:
            generator = torch.Generator().manual_seed(self._seed + 7919 * n)
            m = torch.randn(n, n, dtype=torch.float64, generator=generator) / n ** 0.5
            self._matrices[n] = m + torch.eye(n, dtype=torch.float64)
        return self._matrices[n].to(dtype=like.dtype, device=like.device)

    def _apply(self, letters: str, x: Any) -> Any:
        for letter in reversed(letters):
            m = self._matrix(x.shape[-1], x)
            x = x @ (m.mT if letter == "f" else m)
        return x

    def _given(self) -> Any:
        """The map's matrix ``M`` (what ``dequantize()`` gives), sized and typed as the first
        tensor's last dimension: square, so ``x @ M.t()`` and ``x @ M`` both fit."""
        import torch

        n = self._first[-1] if self._first else 4
        return self._matrix(n, torch.empty((), dtype=self._dtype or torch.float64)).clone()

    def _gradsmith_to(self, dtype: Any) -> LinearStandIn:
        """This stand-in giving its matrix in ``dtype`` (the checks that rerun the Function in
        float32 convert the inputs; a given matrix must follow them)."""
        return LinearStandIn(self._spec, self._seed, self._first, dtype, self._lead)

    def _gradsmith_with_lead(self, lead: int) -> LinearStandIn:
        """This stand-in with the shapes the first tensor has after ``lead`` dimensions."""
        return LinearStandIn(self._spec, self._seed, self._first, self._dtype, lead)

    def _gradsmith_shape(self) -> tuple[int, ...]:
        """What an attribute read as a shape (``domain_shape``) gives."""
        if self._lead is not None:
            return self._first[self._lead:]
        return self._first[2:] if len(self._first) >= 3 else self._first[1:]

    @staticmethod
    def _written(result: Any, kwargs: dict) -> Any:
        """``result``, written into ``out=`` when the code passes one (``op(x, out=y)``,
        as NumPy-style operators take): what the code then reads is ``out``."""
        out = kwargs.get("out")
        if out is None:
            return result
        out.copy_(result)
        return out

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        spec = self._spec
        if not spec.called:
            raise TypeError("the stand-in operator is not callable: the code never calls it")
        if not args and "" in spec.gives:
            return self._given()
        if not spec.flag:
            return self._written(self._apply(spec.half or "f", args[0]), kwargs)
        if spec.flag not in kwargs:
            raise TypeError(f"the stand-in map is called with {spec.flag}= everywhere in the "
                            "code; without it, map or adjoint is unknown")
        return self._apply("f" if bool(kwargs[spec.flag]) == spec.flag_map else "a", args[0])

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name, name=name, obj=self)
        spec = self._spec
        if name in spec.maps:
            letters = spec.maps[name]
            return lambda x, *args, **kwargs: self._written(self._apply(letters, x), kwargs)
        if name in spec.gives:
            return lambda: self._given()
        if name in spec.shapes:
            return self._gradsmith_shape()
        raise AttributeError(f"the stand-in operator has no {name!r}: the code never uses it",
                             name=name, obj=self)

    def __repr__(self) -> str:
        spec = self._spec
        if spec.flag:
            return (f"linear map stand-in x @ M.T on the last dimension when {spec.flag}="
                    f"{spec.flag_map}, its adjoint y @ M when {spec.flag}={not spec.flag_map} "
                    "(forward calls it one way, backward applies it to the gradient the other), "
                    "M a seeded random square matrix")
        if spec.gives and not spec.maps and not spec.flag:
            how = " and ".join(f".{g}()" if g else "calling it" for g in spec.gives)
            return (f"stand-in giving a seeded random square matrix M by {how} (the code "
                    "reads a weight from it and backward gives it no gradient)")
        if spec.half:
            return ("linear map stand-in x @ M.T on the last dimension, M a seeded random "
                    f"square matrix, and {spec.partner} its adjoint y @ M" if spec.half == "f"
                    else f"adjoint stand-in y @ M of {spec.partner} (an adjoint pair: forward "
                    f"calls {spec.partner}, backward applies this one)")
        pairs = ", ".join(f"{n}: {_WORDS[v] if v in _WORDS else v}"
                          for n, v in self._spec.maps.items())
        called = "called: the map, " if self._spec.called else ""
        shapes = (f"; {', '.join(self._spec.shapes)} = the per-sample shape"
                  if self._spec.shapes and self._lead is None else
                  f"; {', '.join(self._spec.shapes)} = {self._gradsmith_shape()}"
                  if self._spec.shapes else "")
        return (f"linear operator stand-in ({called}{pairs}; the map is x @ M.T on the last "
                f"dimension, M a seeded random square matrix, its adjoint y @ M{shapes})")

    def __reduce__(self) -> tuple:
        return LinearStandIn, (self._spec, self._seed, self._first, self._dtype, self._lead)


_WORDS = {"f": "the map", "a": "its adjoint", "fa": "map of adjoint", "af": "adjoint of map",
          "ff": "map twice", "aa": "adjoint twice"}


def with_operators(slots: list, operators: dict[str, Operator]) -> list:
    """The plan with each linear-operator argument given a :class:`LinearStandIn`."""
    from gradsmith.discovery.slots import Slot

    return [Slot(s.name, "operator", operators[s.name], s.hint) if s.name in operators
            else s for s in slots]
