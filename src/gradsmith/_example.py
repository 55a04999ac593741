"""Example inputs registered on a Function or function, for ``gradsmith check`` and pytest.

This module only attaches metadata; it imports neither torch nor the verifier, so op modules can
register their examples without depending on ``gradsmith.checker``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gradsmith._errors import GradsmithError

_ATTR = "__gradsmith_examples__"


@dataclass(frozen=True)
class Example:
    """One set of example inputs for a Function or callable.

    Attributes:
        make_args: zero-argument callable returning the positional args as the user would pass
            them (fresh tensors on every call, so a check can never see a mutated leftover).
        surrogate: differentiable function with the same signature whose autograd gradient the
            backward must match (straight-through estimators).
        options: extra keyword options for :func:`gradsmith.check` (tolerances, ``approximate``,
            ``intended``).
        name: label shown in reports; defaults to the index of the example.
        reference: the plain-PyTorch code this Function replaces, with the same signature.
            ``gradsmith check`` judges the Function's outputs and gradients against its
            autograd (tolerance from the reference's own error at the Function's precision),
            and ``gradsmith bench`` times the Function against it. ``None``: finite
            differences judge the gradients, and bench measures against the autograd of the
            Function's own forward, else ``surrogate``.
    """

    make_args: Callable[[], tuple]
    surrogate: Callable[..., Any] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    name: str | None = None
    reference: Callable[..., Any] | None = None

    @property
    def intended(self) -> Callable[..., Any] | None:
        """The declared intended backward (``intended=``), kept with the check options."""
        return self.options.get("intended")


def example(*args: Any, surrogate: Callable[..., Any] | None = None,
            intended: Callable[..., Any] | None = None, name: str | None = None,
            reference: Callable[..., Any] | None = None, **options: Any) -> Callable[[Any], Any]:
    """Register example inputs on a ``torch.autograd.Function`` subclass or a function.

    Pass either one zero-argument callable that returns the argument tuple (preferred: tensors
    are created fresh for every check), or the arguments themselves. Stack the decorator to
    register several examples.

    Args:
        *args: a factory ``() -> tuple`` or the literal positional arguments.
        surrogate: for an estimator (straight-through round/sign/clamp): a differentiable
            function of the forward's arguments whose autograd gradient the backward must
            reproduce, e.g. ``lambda x: x`` for a straight-through round.
        intended: for an intended modification that is the gradient of no function
            (clipping, sparsification, noise, scaling, reversal): a function of the forward's
            arguments followed by the incoming gradients, returning what backward must return
            (one value per forward argument), e.g. ``lambda x, alpha, grad: (-alpha * grad,
            None)`` for gradient reversal.
        name: label for reports.
        reference: the plain-PyTorch code this Function replaces, with the same signature:
            ``gradsmith check`` judges outputs and every gradient against its autograd at
            the Function's own precision (no atol to set: what Triton and other fused
            kernels computing in float32 need), and ``gradsmith bench`` times against it.
        **options: forwarded to :func:`gradsmith.check` (e.g. ``atol=1e-6``, ``approximate=True``).

    Returns:
        A decorator that returns the object unchanged, with the example attached.

    Raises:
        GradsmithError: if no arguments are given, or both ``surrogate`` and ``intended``.

    Example:
        >>> import gradsmith
        >>> @gradsmith.example(lambda: (2.0,), name="scalar")
        ... def double(x):
        ...     return 2 * x
        >>> [e.name for e in gradsmith.examples_of(double)]
        ['scalar']
    """
    if not args:
        raise GradsmithError(
            "example: got no arguments; pass a factory such as "
            "`lambda: (torch.randn(4, 3),)` or the example arguments themselves"
        )
    if len(args) == 1 and callable(args[0]) and not _is_tensor_like(args[0]):
        make_args = _as_tuple_factory(args[0])
    else:
        literal = tuple(args)
        make_args = lambda: _fresh(literal)  # noqa: E731

    if reference is not None and not callable(reference):
        raise GradsmithError(
            f"example: reference must be a callable with the Function's signature, got "
            f"{type(reference).__name__}; e.g. reference=lambda x: torch.relu(x)"
        )
    if surrogate is not None and intended is not None:
        raise GradsmithError(
            "example: got both surrogate= and intended=; declare one: surrogate= for an "
            "estimator (backward is that function's gradient), intended= for a modification "
            "that is the gradient of no function")
    if intended is not None:
        options["intended"] = intended  # travels with the check options, like approximate=
    ex = Example(make_args=make_args, surrogate=surrogate, options=dict(options), name=name,
                 reference=reference)

    def decorate(obj: Any) -> Any:
        # Decorators apply bottom-up; prepend so examples keep their source order.
        setattr(obj, _ATTR, [ex, *_own_examples(obj)])
        return obj

    return decorate


def examples_of(obj: Any) -> list[Example]:
    """Examples registered on ``obj`` (a Function class, its ``.apply``, or a function).

    Examples are not inherited: a subclass of a registered Function has its own (possibly none).
    Examples registered with the decorator come first; a class attribute ``gradsmith_examples``
    (a staticmethod returning a list of argument tuples) is also understood.
    """
    target = getattr(obj, "__self__", None) if _is_apply(obj) else obj
    target = target if target is not None else obj
    found = list(_own_examples(target))
    legacy = _own(target, "gradsmith_examples")
    if legacy is not None:
        factory = legacy.__func__ if isinstance(legacy, staticmethod) else legacy
        for i, arg_tuple in enumerate(factory()):
            found.append(Example(make_args=_frozen_factory(arg_tuple), name=f"attr[{i}]"))
    return found


def _own(obj: Any, attr: str) -> Any:
    if isinstance(obj, type):
        return obj.__dict__.get(attr)
    return getattr(obj, attr, None)


def _own_examples(obj: Any) -> list[Example]:
    return list(_own(obj, _ATTR) or [])


def _is_apply(obj: Any) -> bool:
    return getattr(obj, "__name__", None) == "apply" and isinstance(
        getattr(obj, "__self__", None), type
    )


def _is_tensor_like(obj: Any) -> bool:
    return hasattr(obj, "shape") and hasattr(obj, "dtype")


def _as_tuple_factory(factory: Callable[[], Any]) -> Callable[[], tuple]:
    def make() -> tuple:
        value = factory()
        return value if isinstance(value, tuple) else (value,)

    return make


def _frozen_factory(arg_tuple: Any) -> Callable[[], tuple]:
    literal = arg_tuple if isinstance(arg_tuple, tuple) else (arg_tuple,)
    return lambda: _fresh(literal)


def _fresh(args: tuple) -> tuple:
    """Copy tensors so each check starts from the registered values, never a mutated leftover."""
    return tuple(a.detach().clone().requires_grad_(a.requires_grad) if _is_tensor_like(a)
                 and hasattr(a, "detach") else a for a in args)
