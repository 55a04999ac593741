"""What GS221 needs to read forward's inputs: the parameters of a Triton kernel of the
linted code that it loads or stores through as plain pointers, indexed with offsets it
computes itself (``X + i * D + tl.arange(0, BV)``), not with strides it is given.

A forward input handed to such a parameter as it arrived (no ``.contiguous()``, no
``.stride()``) is read at the wrong addresses when the caller passes a transposed or
sliced tensor (``torch.split`` of a projection, ``x.t()``): silently wrong outputs."""

from __future__ import annotations

import ast

from gradsmith.linter._symbols import dotted

#: Triton's memory accesses through a pointer (the first argument).
_ACCESS = frozenset({"load", "store", "atomic_add", "atomic_max", "atomic_min", "atomic_xchg",
                     "atomic_cas", "atomic_and", "atomic_or", "atomic_xor"})
_TRITON = frozenset({"tl", "language", "triton"})


def pointer_params(kernel: ast.FunctionDef) -> frozenset[str]:
    """Parameters of ``kernel`` a ``tl.load``/``tl.store`` reaches as its pointer, through
    the names it is added to (``x_ptr = X + offs``); a block pointer (``tl.make_block_ptr``,
    given strides) and a tensor descriptor are left out: they index with the strides passed."""
    cached = kernel.__dict__.get("_gs_pointer_params")
    if cached is not None:
        return cached
    params = {a.arg for a in (*kernel.args.posonlyargs, *kernel.args.args)}
    deps: dict[str, set[str]] = {}
    pointers: set[str] = set()
    strided: set[str] = set()
    for node in ast.walk(kernel):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            used = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        deps.setdefault(name.id, set()).update(used)
        elif isinstance(node, ast.Call):
            parts = dotted(node.func) or []
            if len(parts) >= 2 and parts[-2] in _TRITON and parts[-1] in _ACCESS:
                pointer = node.args[0] if node.args else next(
                    (k.value for k in node.keywords if k.arg in ("pointer", "ptr")), None)
                if pointer is not None:
                    pointers |= {n.id for n in ast.walk(pointer) if isinstance(n, ast.Name)}
            elif parts and parts[-1] in ("make_block_ptr", "make_tensor_descriptor"):
                strided |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    found = kernel.__dict__["_gs_pointer_params"] = frozenset(
        _closure(pointers, deps) & params - _closure(strided, deps))
    return found


def _closure(names: set[str], deps: dict[str, set[str]]) -> set[str]:
    """``names`` and every name they are computed from."""
    seen: set[str] = set()
    stack = list(names)
    while stack:
        name = stack.pop()
        if name not in seen:
            seen.add(name)
            stack.extend(deps.get(name, ()))
    return seen


def contiguous_at_calls(facts) -> set[str]:
    """Forward inputs every linted call of ``Fn.apply`` passes as ``x.contiguous()``."""
    from gradsmith.linter._reuse import call_arguments

    inputs = facts.inputs
    found: set[str] = set()
    for position, name in enumerate(inputs[0] if inputs is not None else ()):
        passed = call_arguments(facts.fc.node.name, position, facts.sym_of)
        if passed and all(isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute)
                          and arg.func.attr == "contiguous" for arg, _ in passed):
            found.add(name)
    return found


def launch_target(kernel: ast.FunctionDef, index) -> str | None:
    """The kernel parameter an argument at ``index`` (a position or a keyword) fills."""
    params = [a.arg for a in (*kernel.args.posonlyargs, *kernel.args.args)]
    if isinstance(index, int):
        return params[index] if index < len(params) else None
    return index if index in params else None


__all__ = ["contiguous_at_calls", "launch_target", "pointer_params"]
