"""What a Function's backward tells about forward's parameters (private): which inputs it
declares not differentiable (every ``return`` gives them a literal ``None``) and which
parameters are functions that only backward calls. Synthesis reads both before it probes.
"""

from __future__ import annotations

import ast
import inspect

from gradsmith.discovery.hints import Hint, _param_of
from gradsmith.discovery.source import parse as _parse
from gradsmith.discovery.source import stored_on_ctx


def no_gradient_positions(owner: type | None) -> set[int]:
    """Positions of forward's inputs for which every ``return`` of backward is a literal
    ``None``: the author declares them not differentiable (a sparse operand, a grid of
    sample positions, a fixed filter), so they are synthesised without ``requires_grad``.

    Example:
        >>> import torch
        >>> class F(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, w, m):
        ...         return w * m
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         return g, None
        >>> no_gradient_positions(F)
        {1}
    """
    tree = _parse(getattr(owner, "backward", None)) if owner is not None else None
    if tree is None:
        return set()
    returns = [n.value for n in ast.walk(tree) if isinstance(n, ast.Return)]
    if not returns or not all(isinstance(r, ast.Tuple) for r in returns):
        return set()
    positions: set[int] | None = None
    passed_through = _returned_as_is(owner)
    always_none = _none_names(tree)
    for r in returns:
        nones = {i for i, e in enumerate(r.elts)
                 if isinstance(e, ast.Constant) and e.value is None
                 or isinstance(e, ast.Name) and e.id in always_none}
        positions = nones if positions is None else positions & nones
    if all(len(r.elts) <= len(positions or ()) for r in returns):
        return set()  # no gradient at all: a backward to show, not inputs to freeze
    return (positions or set()) - passed_through


def _none_names(tree: ast.AST) -> set[str]:
    """Backward's names only ever bound to a literal ``None`` (``grad_x = grad_w = None``,
    then only ``grad_x`` computed): returning one is returning ``None``. Any other binding
    (an assignment, ``+=``, a loop or ``with`` target, a parameter) keeps the name out.

    Example:
        >>> tree = ast.parse("def backward(ctx, g):\\n    a = b = c = None\\n    a = g\\n"
        ...                  "    for c in g: pass\\n    return a, b, c")
        >>> sorted(_none_names(tree))
        ['b']
    """
    to_none = {id(t) for n in ast.walk(tree) if isinstance(n, ast.Assign)
               and isinstance(n.value, ast.Constant) and n.value.value is None
               for t in n.targets if isinstance(t, ast.Name)}
    bound: dict[str, bool] = {}  # name -> every binding is `= None`
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound[node.id] = bound.get(node.id, True) and id(node) in to_none
        elif isinstance(node, ast.arg):
            bound[node.arg] = False
    return {name for name, none in bound.items() if none}


def _returned_as_is(owner: type) -> set[int]:
    """Positions of inputs that forward returns as they are (``return t.detach(), y``): a
    ``None`` for one of those reroutes its gradient on purpose (an estimator the check must
    see), it does not mark data."""
    forward = getattr(owner, "forward", None)
    tree = _parse(forward)
    try:
        params = list(inspect.signature(forward).parameters)
    except (TypeError, ValueError):
        return set()
    if "setup_context" not in vars(owner) and params:
        params = params[1:]  # ctx
    hints = {n: Hint() for n in params}
    found: set[int] = set()
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Return) and node.value is not None:
            elts = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            found |= {params.index(n) for n in (_param_of(e, hints) for e in elts) if n}
    return found


# Functions that call the function they are given (``vjp(event_fn, inputs)``).
_HIGHER_ORDER = {"vjp", "jvp", "jacobian", "hessian", "vhp", "hvp", "jacrev", "jacfwd",
                 "checkpoint", "vmap"}


def backward_functions(owner: type | None, names: list[str]) -> set[str]:
    """Parameters that forward only stores on ctx (``ctx.func = func``) and backward calls:
    directly (``ctx.func(t, y)``, ``func = ctx.func; func(t, y)``) or through a function that
    calls what it is given (``vjp(ctx.event_fn, (t, y))``). They are functions of tensors,
    which forward never runs: only a probe of backward can tell whether invented ones fit.

    Example:
        >>> import torch
        >>> class F(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, func, t, y):
        ...         ctx.func = func
        ...         return y.clone()
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         f = ctx.func
        ...         return None, None, g * f(t, y)
        >>> backward_functions(F, ["func", "t", "y"])
        {'func'}
    """
    if owner is None:
        return set()
    stored: dict[str, str] = {}  # ctx attribute -> parameter
    called_in_forward: set[str] = set()
    for method in ("forward", "setup_context"):
        tree = _parse(vars(owner).get(method) or getattr(owner, method, None))
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) \
                    and node.value.id in names:
                for target in node.targets:
                    if isinstance(target, ast.Attribute):
                        stored[target.attr] = node.value.id
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                called_in_forward.add(node.func.id)
        stored.update(stored_on_ctx(tree, names))  # ctx.fn = inputs[1] in setup_context
    tree = _parse(getattr(owner, "backward", None))
    if tree is None or not stored:
        return set()
    aliases: dict[str, str] = {}  # local name -> parameter
    # Only a stored value read off ctx (``ctx.pad``), never a module's function of the same
    # name: ``F.pad(x, (pad,) * 4)`` beside ``ctx.pad = pad`` made the int padding a callable
    # (corpus 12b dev, spent: CMPUT566-Project's slow_custom_ConvFunction).
    ctx = _ctx_name(tree)

    def param(node: ast.AST) -> str | None:
        if isinstance(node, ast.Attribute) and node.attr in stored:
            base = node.value
            return stored[node.attr] if isinstance(base, ast.Name) and base.id == ctx else None
        return aliases.get(node.id) if isinstance(node, ast.Name) else None

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and param(node.value) is not None:
            for target in node.targets:
                if isinstance(target, ast.Name):
                    aliases[target.id] = param(node.value)
    found: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = param(node.func)
        if name is not None:
            found.add(name)
        callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(
            node.func, "id", None)
        if callee in _HIGHER_ORDER and node.args and param(node.args[0]) is not None:
            found.add(param(node.args[0]))
    return found - called_in_forward


def _ctx_name(tree: ast.AST) -> str:
    """The name backward's first parameter goes by (``ctx`` mostly; ``context``, ``self``)."""
    fn = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef,
                                                                ast.AsyncFunctionDef))), None)
    args = [] if fn is None else [*fn.args.posonlyargs, *fn.args.args]
    return args[0].arg if args else "ctx"
