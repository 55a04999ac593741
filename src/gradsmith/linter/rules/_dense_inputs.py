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
    """Parameters of ``kernel`` a ``tl.load``/``tl.store`` reaches as its pointer with
    row-major offsets: the offset multiplies a row index by a parameter that is not a
    block size (``X + row * N + cols``, ``X + i_bh * T * D + ...``), so the kernel assumes
    the row stride instead of being given it. A flat offset (``X + pid * BLOCK +
    tl.arange(0, BLOCK)``, an elementwise kernel, or a vector of weights) reads a permuted
    dense tensor in its own memory order and is left out, as are a block pointer
    (``tl.make_block_ptr``, given strides), a tensor descriptor and parameters used as
    numbers (multiplied, compared, a range or block bound)."""
    cached = kernel.__dict__.get("_gs_pointer_params")
    if cached is not None:
        return cached
    params = {a.arg for a in (*kernel.args.posonlyargs, *kernel.args.args)}
    values: dict[str, list[ast.expr]] = {}
    pointers: list[ast.expr] = []
    numbers: set[str] = set()  # parameters used as numbers
    blocks: set[str] = set()  # names bounding a tl.arange: block sizes
    strided: set[str] = set()
    computed: list[ast.Call] = []  # block pointers whose row stride the kernel computes
    for node in ast.walk(kernel):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        values.setdefault(name.id, []).append(node.value)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, _SCALING):
            numbers |= {n.id for side in (node.left, node.right) for n in _factors(side)}
        elif isinstance(node, ast.Compare):
            numbers |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Call):
            parts = dotted(node.func) or []
            if len(parts) >= 2 and parts[-2] in _TRITON and parts[-1] in _ACCESS:
                pointer = node.args[0] if node.args else next(
                    (k.value for k in node.keywords if k.arg in ("pointer", "ptr")), None)
                if pointer is not None:
                    pointers.append(pointer)
            elif parts and parts[-1] == "make_block_ptr" and _computed_strides(node):
                computed.append(node)
            elif parts and parts[-1] in ("make_block_ptr", "make_tensor_descriptor"):
                strided |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            elif parts and parts[-1] in ("arange", "range"):
                bound = {n.id for a in node.args for n in ast.walk(a) if isinstance(n, ast.Name)}
                numbers |= bound
                if parts[-1] == "arange":
                    blocks |= bound
    found: set[str] = set()
    for block in computed:  # `make_block_ptr(v + i * V, (T, V), (H*V, 1), ...)`
        base = block.args[0] if block.args else next(
            (k.value for k in block.keywords if k.arg == "base"), None)
        if base is None or _computed_strides(block, blocks) is None:
            continue
        names = {n.id for e in _reached(base, values) for n in ast.walk(e)
                 if isinstance(n, ast.Name)}
        if not names & strided:
            found |= names & params - numbers - blocks
    handled = {n.id for block in computed for n in ast.walk(block) if isinstance(n, ast.Name)}
    for pointer in pointers:
        exprs = _reached(pointer, values)
        names = {n.id for e in exprs for n in ast.walk(e) if isinstance(n, ast.Name)}
        if names & (strided | handled):
            continue
        row_major = any(
            isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult) and any(
                f.id in params and f.id not in blocks
                for side in (n.left, n.right) for f in _factors(side))
            for e in exprs for n in ast.walk(e))
        if row_major:
            found |= names & params - numbers
    found_set = kernel.__dict__["_gs_pointer_params"] = frozenset(found)
    return found_set


_SCALING = (ast.Mult, ast.FloorDiv, ast.Mod, ast.Div)


def _computed_strides(block: ast.Call, blocks: frozenset[str] | set[str] = frozenset()):
    """The strides of a ``tl.make_block_ptr`` when the kernel computes them from sizes
    instead of being given them: the last is the literal 1 and an outer one multiplies
    parameters that are not block sizes (``(H*V, 1)``: a dense ``[.., T, H, V]`` layout
    assumed); None otherwise (``(stride_t, stride_v)`` passed by the launch)."""
    strides = block.args[2] if len(block.args) > 2 else next(
        (k.value for k in block.keywords if k.arg == "strides"), None)
    if not isinstance(strides, ast.Tuple) or len(strides.elts) < 2:
        return None
    last = strides.elts[-1]
    if not (isinstance(last, ast.Constant) and last.value == 1):
        return None
    outer = [e for e in strides.elts[:-1] if isinstance(e, ast.BinOp)
             and isinstance(e.op, ast.Mult) and len(_factors(e)) >= 2
             and any(f.id not in blocks for f in _factors(e))]
    return strides if outer else None


def _factors(expr: ast.expr) -> list[ast.Name]:
    """The names multiplied together in ``expr`` (``i_bh * T * D``: all three)."""
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mult):
        return _factors(expr.left) + _factors(expr.right)
    return [expr] if isinstance(expr, ast.Name) else []


def _reached(expr: ast.expr, values: dict[str, list[ast.expr]]) -> list[ast.expr]:
    """``expr`` and the values of every local it is computed from (``x_ptr = X + offs``)."""
    seen: set[str] = set()
    out = [expr]
    stack = [n.id for n in ast.walk(expr) if isinstance(n, ast.Name)]
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        for value in values.get(name, ()):
            out.append(value)
            stack.extend(n.id for n in ast.walk(value) if isinstance(n, ast.Name))
    return out


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
