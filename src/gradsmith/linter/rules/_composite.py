"""Builtins written out as formulas: GELU's tanh form, softplus, logsumexp, softmax, ...

forward's locals are inlined into its single returned expression, which is normalised to a
small tree (``torch.tanh(e)``, ``e.tanh()`` and ``F.tanh(e)`` all become ``tanh``, constant
sub-expressions such as ``math.sqrt(2 / math.pi)`` are folded) and matched against the
standard formulas. GS302 uses it when forward is not a single builtin call.
"""

from __future__ import annotations

import ast
import math

_MATH = {"pi": math.pi, "e": math.e}
_FUNCS = {"sqrt": math.sqrt, "exp": math.exp, "log": math.log}
_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**"}
#: Method/function names folded onto one spelling.
_ALIASES = {"amax": "max", "logaddexp": None, "clip": "clamp", "special_expit": "sigmoid",
            "expit": "sigmoid"}
_MAX_NODES = 400


class _Unsupported(Exception):
    pass


def _name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


class _Normaliser:
    def __init__(self, inputs: set[str], env: dict) -> None:
        self.inputs, self.env, self.size = inputs, env, 0

    def __call__(self, node: ast.expr):
        self.size += 1
        if self.size > _MAX_NODES:
            raise _Unsupported
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
                and not isinstance(node.value, bool):
            return ("num", float(node.value))
        if isinstance(node, ast.Name):
            if node.id in self.env:
                return self.env[node.id]
            if node.id in self.inputs:
                return ("var", node.id)
            raise _Unsupported
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in ("math", "np", "numpy") and node.attr in _MATH:
            return ("num", _MATH[node.attr])
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = self(node.operand)
            return ("num", -inner[1]) if inner[0] == "num" else ("neg", inner)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            left, right = self(node.left), self(node.right)
            op = _OPS[type(node.op)]
            if left[0] == right[0] == "num":
                try:
                    return ("num", float(eval(f"{left[1]!r} {op} {right[1]!r}")))  # noqa: S307
                except (ArithmeticError, ValueError, OverflowError):
                    raise _Unsupported from None
            return ("bin", op, left, right)
        if isinstance(node, ast.Call):
            return self._call(node)
        raise _Unsupported

    def _call(self, node: ast.Call):
        name = _name(node.func)
        if name is None:
            raise _Unsupported
        name = _ALIASES.get(name, name)
        if name is None:
            raise _Unsupported
        args = list(node.args)
        receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
        is_module = isinstance(receiver, ast.Name) and receiver.id in (
            "torch", "F", "math", "np", "numpy", "functional", "special")
        if receiver is not None and not is_module and not (
                isinstance(receiver, ast.Attribute) and _name(receiver) in ("nn", "functional")):
            args.insert(0, receiver)  # x.exp() -> exp(x)
        if not args:
            raise _Unsupported
        values = [self(a) for a in args]
        if name in _FUNCS and len(values) == 1 and values[0][0] == "num":
            return ("num", _FUNCS[name](values[0][1]))
        return ("call", name, tuple(values))


def _walk(tree):
    yield tree
    if tree[0] == "call":
        for arg in tree[2]:
            yield from _walk(arg)
    elif tree[0] == "bin":
        yield from _walk(tree[2])
        yield from _walk(tree[3])
    elif tree[0] == "neg":
        yield from _walk(tree[1])


def _calls(tree) -> set[str]:
    return {t[1] for t in _walk(tree) if t[0] == "call"}


def _has_num(tree, value: float, tol: float = 1e-4) -> bool:
    return any(t[0] == "num" and abs(t[1] - value) <= tol for t in _walk(tree))


def _is_call(tree, name: str) -> bool:
    return tree[0] == "call" and tree[1] == name


def _is_one(tree) -> bool:
    return tree[0] == "num" and tree[1] == 1.0


def _one_plus(tree, inner) -> bool:
    """``1 + inner(...)`` in either order."""
    return tree[0] == "bin" and tree[1] == "+" and (
        (_is_one(tree[2]) and inner(tree[3])) or (_is_one(tree[3]) and inner(tree[2])))


def _exp_of_var(tree) -> bool:
    return _is_call(tree, "exp") and tree[2][0][0] in ("var", "bin", "neg")


def match(tree) -> str | None:
    """The builtin whose standard formula ``tree`` is, or None."""
    calls = _calls(tree)
    if "tanh" in calls and _has_num(tree, 0.044715) and _has_num(tree, 0.5):
        return "torch.nn.functional.gelu(x, approximate='tanh')"
    if "erf" in calls and _has_num(tree, 0.5) and (
            _has_num(tree, math.sqrt(0.5)) or _has_num(tree, math.sqrt(2.0))):
        return "torch.nn.functional.gelu"
    for t in _walk(tree):
        if _is_call(t, "log") and _one_plus(t[2][0], _exp_of_var):
            return "torch.nn.functional.softplus"
        if _is_call(t, "log1p") and _exp_of_var(t[2][0]):
            return "torch.nn.functional.softplus"
        if _is_call(t, "log") and _is_call(t[2][0], "sum") and _is_call(t[2][0][2][0], "exp"):
            return "torch.logsumexp"
        if t[0] == "bin" and t[1] == "/" and _is_one(t[2]) and _one_plus(
                t[3], lambda e: _is_call(e, "exp") and e[2][0][0] == "neg"):
            return "torch.sigmoid" if t is tree else "torch.nn.functional.silu"
        if t[0] == "bin" and t[1] == "/" and _is_call(t[2], "exp") and _is_call(t[3], "sum") \
                and _is_call(t[3][2][0], "exp"):
            return "torch.softmax"
    if tree[0] == "bin" and tree[1] == "*" and (
            (tree[2][0] == "var" and _is_call(tree[3], "sigmoid"))
            or (tree[3][0] == "var" and _is_call(tree[2], "sigmoid"))):
        return "torch.nn.functional.silu"
    return None


def composite_op(method, inputs: set[str], ctx: str | None) -> str | None:
    """The builtin forward's body writes out, or None (see the module docstring)."""
    env: dict = {}
    normalise = _Normaliser(inputs, env)
    result = None
    try:
        for stmt in method.node.body:
            if isinstance(stmt, ast.Expr) and (
                isinstance(stmt.value, ast.Constant) or (
                    isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute)
                    and isinstance(stmt.value.func.value, ast.Name)
                    and stmt.value.func.value.id == ctx)):
                continue  # docstring, ctx.save_for_backward(...)
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target = stmt.targets[0]
                if isinstance(target, ast.Attribute):
                    continue  # ctx.attr = ...
                if isinstance(target, ast.Name):
                    env[target.id] = normalise(stmt.value)
                    continue
                return None
            if isinstance(stmt, ast.Return) and stmt.value is not None and result is None:
                result = normalise(stmt.value)
                continue
            return None
    except _Unsupported:
        return None
    if result is None:
        return None
    variables = {t[1] for t in _walk(result) if t[0] == "var"}
    return match(result) if len(variables) == 1 else None
