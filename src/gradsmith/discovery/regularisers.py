"""Small positive regularisers and thresholds, read from how the code uses a number (private).

peps-torch's eigen- and singular-value backwards take ``ad_decomp_reg``/``cutoff`` and compute
``F = safe_inverse(D_j - D_i, epsilon=ad_decomp_reg)`` with ``safe_inverse(x, epsilon) = x /
(x**2 + epsilon)``: a regulariser that keeps ``1 / x`` finite for degenerate values, tiny and
positive in every real call. Synthesised as a ``randn`` scalar (-0.57), it made a correct
backward wrong by O(1): a false alarm. A parameter of forward gets small positive values when
the code uses it as such a number, in forward or in backward (through what forward saves or
keeps on ctx) or in the functions of its module they hand it to:

- **added in a denominator**: ``x / (x ** 2 + eps)``, ``g / (norm + eps)``;
- **a floor**: ``clamp(min=eps)``, ``clamp_min(eps)``, ``torch.clamp(x, eps)`` (no upper
  bound: ``clamp(lo, hi)`` is a range, the operation itself);
- **a threshold on a magnitude**: ``abs(x) < eps``, ``x.abs() <= cutoff``;

and either backward returns a literal ``None`` for it (a constant the author does not
differentiate) or its name says it (``eps``, ``reg``, ``tol``, ``cutoff``, ``thresh``, ...).
Read, never run.
"""

from __future__ import annotations

import ast
from typing import Any

from gradsmith.discovery.source import parse

#: Values a regulariser gets: tiny against O(1) differences, so ``x / (x**2 + eps)`` is
#: ``1 / x`` to 1e-10 or better, and positive.
DOMAIN = (1e-13, 1e-11)
_WORDS = {"eps", "epsilon", "reg", "regularization", "regularisation", "regulariser",
          "regularizer", "tol", "tolerance", "cutoff", "thresh", "threshold", "damping",
          "jitter"}
_FLOORS = {"clamp", "clamp_", "clip", "clip_", "clamp_min", "clamp_min_"}


def read_regularisers(fn: Any, hints: dict) -> None:
    """Give each parameter of ``fn`` (a Function's forward) that the code uses as a small
    positive regulariser or threshold a domain of tiny positive values (``hints``: name ->
    :class:`~gradsmith.discovery.hints.Hint`; a domain already read wins).

    Example:
        >>> import torch
        >>> from gradsmith.discovery.hints import Hint
        >>> def inverse(x, epsilon):
        ...     return x / (x ** 2 + epsilon)
        >>> class Eig(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, a, reg):
        ...         d, u = torch.linalg.eigh(a)
        ...         ctx.save_for_backward(d, u, reg)
        ...         return d
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         d, u, reg = ctx.saved_tensors
        ...         return u @ torch.diag(g * inverse(d, reg)) @ u.t(), None
        >>> hints = {"a": Hint(), "reg": Hint()}
        >>> read_regularisers(Eig.forward, hints)
        >>> hints["reg"].domain
        (1e-13, 1e-11)
    """
    owner = _owner(fn)
    if owner is None:
        return
    from gradsmith.discovery.backward_reads import no_gradient_positions
    from gradsmith.discovery.callees import followed

    names = list(hints)
    constant = {names[i] for i in no_gradient_positions(owner) if i < len(names)}
    candidates = {n for n in names if n in constant or _named(n)}
    if not candidates:
        return
    forward = parse(fn)
    backward_fn = getattr(owner, "backward", None)
    backward = parse(backward_fn)
    if forward is None:
        return
    readers = [(fn, forward, {n: n for n in candidates})]
    if backward is not None:
        savers = [(forward, {n: n for n in candidates})]
        setup = _setup_context(owner, list(hints), candidates)
        if setup is not None:
            savers.append(setup)
        readers.append((backward_fn, backward, _in_backward(savers, backward)))
    found: dict[str, str] = {}
    for function, tree, local in readers:
        if not local:
            continue
        _uses(tree, local, found)
        for helper, passed in followed(function, tree, local, owner, package=True):
            where = next((n.name for n in ast.walk(helper) if isinstance(n, ast.FunctionDef)),
                         "")
            _uses(helper, passed, found, where)
    for name, how in found.items():
        hint = hints[name]
        if hint.domain is None and hint.kind in (None, "tensor", "float"):
            hint.domain = DOMAIN
            hint.domain_why = f"a small positive regulariser: the code {how}"


def _owner(fn: Any) -> type | None:
    """The ``autograd.Function`` whose forward ``fn`` is (a class of its module)."""
    qualname = getattr(fn, "__qualname__", "")
    parts = qualname.split(".")
    if len(parts) != 2 or parts[1] != "forward":
        return None
    owner = (getattr(fn, "__globals__", None) or {}).get(parts[0])
    return owner if isinstance(owner, type) and hasattr(owner, "backward") else None


def _named(name: str) -> bool:
    return bool(set(name.lower().strip("_").split("_")) & _WORDS)


def _setup_context(owner: type, names: list[str],
                   candidates: set[str]) -> tuple[ast.AST, dict[str, str]] | None:
    """A modern Function's ``setup_context`` and its local name -> forward parameter for the
    candidates it unpacks from ``inputs`` (``_, reg = inputs``): there, not in forward, is
    where such a Function saves what backward reads (yastn's SYMEIG saves its
    ``ad_decomp_reg`` so)."""
    method = owner.__dict__.get("setup_context")
    tree = parse(getattr(method, "__func__", method)) if method is not None else None
    if tree is None:
        return None
    local: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], (ast.Tuple, ast.List)) and \
                isinstance(node.value, ast.Name) and node.value.id == "inputs":
            local.update({e.id: names[i] for i, e in enumerate(node.targets[0].elts)
                          if isinstance(e, ast.Name) and i < len(names)
                          and names[i] in candidates})
    return (tree, local) if local else None


def _in_backward(savers: list[tuple[ast.AST, dict[str, str]]],
                 backward: ast.AST) -> dict[str, str]:
    """Backward's local name -> forward parameter, for candidates that forward (or
    ``setup_context``; ``savers``: tree and its local name -> parameter) saves
    (``ctx.save_for_backward(d, u, reg)`` ... ``d, u, reg = ctx.saved_tensors``) or keeps on
    ctx (``ctx.reg = reg`` ... ``ctx.reg``, read as the name ``ctx.reg``)."""
    saved: dict[int, str] = {}
    kept: dict[str, str] = {}
    for tree, names in savers:
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr == "save_for_backward":
                saved.update({i: names[a.id] for i, a in enumerate(node.args)
                              if isinstance(a, ast.Name) and a.id in names})
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and \
                    node.value.id in names:
                kept.update({t.attr: names[node.value.id] for t in node.targets
                             if isinstance(t, ast.Attribute)})
    local: dict[str, str] = {}
    for node in ast.walk(backward):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target, value = node.targets[0], node.value
        if isinstance(value, ast.Attribute) and value.attr == "saved_tensors" and \
                isinstance(target, (ast.Tuple, ast.List)):
            local.update({e.id: saved[i] for i, e in enumerate(target.elts)
                          if isinstance(e, ast.Name) and i in saved})
        elif isinstance(value, ast.Attribute) and value.attr in kept and \
                isinstance(target, ast.Name):
            local[target.id] = kept[value.attr]
    for node in ast.walk(backward):  # ctx.reg used in place
        if isinstance(node, ast.Attribute) and node.attr in kept and \
                isinstance(node.value, ast.Name):
            local[ast.unparse(node)] = kept[node.attr]
    return local


def _uses(tree: ast.AST, local: dict[str, str], found: dict[str, str],
          where: str = "") -> None:
    """Record in ``found`` (parameter -> what the code does) each regulariser use in
    ``tree`` of a name in ``local`` (local name -> parameter)."""
    def param(node: ast.AST | None) -> str | None:
        if isinstance(node, (ast.Name, ast.Attribute)):
            return local.get(ast.unparse(node))
        return None

    at = f" in {where}" if where else ""
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            for sub in ast.walk(node.right):
                if isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.Add):
                    for side in (sub.left, sub.right):
                        if (p := param(side)) is not None:
                            found.setdefault(p, f"adds it in a denominator{at}: "
                                                f"`{ast.unparse(node)}`")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in _FLOORS:
            torch_call = isinstance(node.func.value, ast.Name) and node.func.value.id == "torch"
            bounds = node.args[1:] if torch_call else node.args
            floor = next((k.value for k in node.keywords if k.arg == "min"),
                         bounds[0] if bounds else None)
            ceiling = any(k.arg == "max" for k in node.keywords) or len(bounds) > 1
            if not ceiling and (p := param(floor)) is not None:  # clamp(lo, hi): a range
                found.setdefault(p, f"floors a value at it{at}: `{ast.unparse(node)}`")
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(
                node.ops[0], (ast.Lt, ast.LtE, ast.Gt, ast.GtE)):
            left, right = node.left, node.comparators[0]
            for value, bound in ((left, right), (right, left)):
                if _magnitude(value) and (p := param(bound)) is not None:
                    found.setdefault(p, f"compares a magnitude with it{at}: "
                                        f"`{ast.unparse(node)}`")


def _magnitude(node: ast.AST) -> bool:
    """``abs(x)``, ``torch.abs(x)``, ``x.abs()``."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    return name in ("abs", "absolute")
