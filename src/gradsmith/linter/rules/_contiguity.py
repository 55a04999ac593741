"""GS221: backward hands grad_output, as it arrived, to a kernel that indexes it densely.

A name "holds the raw gradient" when it is a gradient parameter of backward, or is bound to
one through operations that keep its strides (a view, ``reshape``, indexing, a transpose).
The family of names is guarded when any of them is made contiguous, copied, asked for its
strides or checked with ``is_contiguous()``, or rebound to anything else. An ``assert
g.is_contiguous()`` on the gradient as it arrived is a finding of its own: it fails loudly,
but for the expanded gradient of ``out.sum()`` too. An unguarded name given to a Triton launch, or to a
compiled extension's function, is a finding; so is one given to a helper of the linted code
that does that with its parameter (followed a few levels deep). Forward's inputs are read
the same way, for Triton kernels of the linted code that index them row-major
(_dense_inputs.py). Which names hold what and what guards them: _layout.py.
"""

from __future__ import annotations

import ast

from gradsmith.linter import _extensions
from gradsmith.linter._facts import Facts
from gradsmith.linter._kernels import finder, is_custom_op, is_kernel, launched
from gradsmith.linter._registry import Rule, checker
from gradsmith.linter._symbols import dotted
from gradsmith.linter.rules._common import own, short
from gradsmith.linter.rules._dense_inputs import (
    contiguous_at_calls,
    launch_target,
    pointer_params,
)
from gradsmith.linter.rules._kernels import (
    _H,
    _KNOWN_WRAPPER,
    _called_helper,
    _Lazy,
    _looks_like_kernel,
    _opaque,
)
from gradsmith.linter.rules._layout import (
    asserted_contiguous,
    body_nodes,
    decorator_guarded,
    is_raw,
    raw_names,
)

_CLS = "class Fn(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n" \
       "        return x * 2\n\n"
_BWD = "from torch.autograd.function import once_differentiable\n" + _H + _CLS + \
    "    @staticmethod\n    @once_differentiable\n    def backward(ctx, g):\n"
GS221 = Rule(
    "GS221", "kernel-assumes-contiguous", "warning",
    "grad_output goes to a Triton kernel or compiled extension without `.contiguous()` or "
    "its strides (or backward asserts `grad_output.is_contiguous()`); or forward hands an "
    "input so to a Triton kernel of the linted code that loads it with row-major offsets "
    "of its own (`X + row * cols + offs`)",
    "grad_output is not guaranteed contiguous: the gradient of `out.sum()` is an expanded "
    "tensor with stride 0, and `out.t()` or slicing gives other strides, so a kernel that "
    "indexes it as a dense row-major tensor reads the wrong elements and the gradient is "
    "silently wrong (Triton), or reads out of bounds (C++ through data_ptr). The same holds "
    "for a forward input a caller slices or transposes (`torch.split` of a projection): the "
    "output is silently wrong. A warning: "
    "statically the linter cannot see what the kernel or extension does with strides.",
    "`grad_output = grad_output.contiguous()` before the call (a no-op when it already is), "
    "or pass its strides (`*grad_output.stride()`) and index with them.",
    bad=_BWD + "        out = torch.empty_like(g)\n        _k[(1,)](g, out)  # GS221\n"
    "        return out\n",
    good=_BWD + "        g = g.contiguous()\n        out = torch.empty_like(g)\n"
    "        _k[(1,)](g, out)\n        return out\n",
    brief="gradient or input to a dense kernel without .contiguous() or strides",
)

#: How many helpers deep a dense use is looked for.
_DEPTH = 3


@checker(GS221)
def check_layout_of_gradients(facts: Facts, report) -> None:
    sym = facts.sym_of[id(facts.fc.source)]
    for method in own(facts, "backward", "vjp"):
        grads = set(method.params[1:])
        if method.node.args.vararg is not None:  # `backward(ctx, *grad_outputs)`
            grads.add(method.node.args.vararg.arg)
        if not grads:
            continue
        asserted = asserted_contiguous(method.node, grads)
        if asserted is not None:
            node, name = asserted
            report("GS221", method.source, node,
                   f"`assert {name}.is_contiguous()` fails for an expanded gradient")
            continue
        found = _dense_use(method.node, grads, _Where(sym, facts.sym_of), 0)
        if found is not None:
            node, what, (launch, launch_what, there) = found
            klass = facts.fc.node
            if launch is not node and there.sym.source is method.source and \
                    klass.lineno <= launch.lineno <= klass.end_lineno:
                # a launch in the Function's own helper (`Fn.__backward`) is where a reader
                # sees the dense indexing, and where `.contiguous()` goes
                node, what = launch, f"{launch_what} (from backward's `{short(what, 40)}`)"
            report("GS221", method.source, node, what)
    for method in own(facts, "forward"):
        names = set(method.params if facts.fc.setup_style else method.params[1:])
        where = _Where(sym, facts.sym_of)
        found = _dense_use(method.node, names, where, 0, inputs=True)
        if found is not None:  # callers making every argument contiguous guard it
            found = _dense_use(method.node, names - contiguous_at_calls(facts), where, 0,
                               inputs=True)
        if found is not None:
            report("GS221", method.source, found[0], f"forward input {found[1]}")


class _Where:
    """The module a function lives in: how its calls resolve (kernels, extensions, helpers)."""

    def __init__(self, sym, sym_of: dict) -> None:
        self.sym, self.sym_of = sym, sym_of
        self.find = finder(sym, sym_of)
        self.functions = sym.source.functions
        self._scopes: dict[int, tuple[_extensions.Scope, _Lazy]] = {}

    def extension_call(self, call: ast.Call, func: ast.AST) -> str | None:
        """The call's text when it runs a compiled extension's function."""
        scope, local = self._scope(func)
        what = _opaque(call, self.find, local, scope)
        parts = dotted(call.func) or []
        if what is None or what.startswith("`torch.ops.") or parts and self._ops(parts[0]):
            return None  # a registered op may be Python (torch.library) and copy as needed
        if parts and self._jitted(parts[0]):
            return None  # a jiterator kernel runs on TensorIterator, which honours strides
        module = self.find.external(parts[0]) if parts else None
        if module and _KNOWN_WRAPPER.match(f"{module}.{parts[0]}"):
            return None  # a Python wrapper that makes its inputs contiguous itself
        target = self.find(call.func)
        return None if is_kernel(target) or is_custom_op(target) else what

    def _scope(self, func: ast.AST) -> tuple[_extensions.Scope, _Lazy]:
        """What is an extension in ``func``, and its locals: built once per function (it
        walks the whole body), not once per call in it."""
        found = self._scopes.get(id(func))
        if found is None:
            scope = _extensions.Scope(self.sym, self.sym_of,
                                      _extensions.names(self.sym, self.sym_of)).with_locals(func)
            found = self._scopes[id(func)] = (scope, _Lazy(func, frozenset(scope.known)))
        return found

    def _jitted(self, name: str) -> bool:
        """``name`` is bound at module level to a ``torch.cuda.jiterator`` kernel."""
        return self._bound(name, lambda value: _extensions.is_jiterator(value, self.sym))

    def _ops(self, name: str) -> bool:
        """``name`` is bound at module level to a ``torch.ops.<namespace>``."""
        return self._bound(name, lambda value: (dotted(value) or [])[:2] == ["torch", "ops"])

    def _bound(self, name: str, test) -> bool:
        """``name`` is a target of a module-level assignment whose value passes ``test``."""
        return any(
            isinstance(stmt, ast.Assign) and test(stmt.value)
            and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets)
            for stmt in self.sym.source.tree.body)

    def helper(self, call: ast.Call) -> tuple[ast.FunctionDef, _Where] | None:
        node = _called_helper(call, self.functions, self.find)
        if node is None:
            return None
        owner = self.find.owner(node)
        return node, (self if owner is None or owner is self.sym else _Where(owner, self.sym_of))


def _dense_use(func: ast.AST, grads: set[str], where: _Where, depth: int, inputs: bool = False):
    """The first call in ``func`` that hands an unguarded raw gradient to a dense kernel:
    (that call, what it hands to what, (the launch itself, its text, its module)); the launch
    is the call itself or one inside the helpers it goes through. With ``inputs`` (forward's
    inputs, which may not be tensors) only a Triton kernel of the linted code counts, at a
    parameter it loads or stores through with offsets of its own (see _dense_inputs.py)."""
    raw = raw_names(func, grads - decorator_guarded(func, where))
    if not raw:
        return None
    for node in body_nodes(func):
        if not isinstance(node, ast.Call):
            continue
        passed = [(i, a) for i, a in enumerate(node.args) if is_raw(a, raw)]
        first_star = next((i for i, a in enumerate(node.args) if isinstance(a, ast.Starred)), None)
        if first_star is not None and is_raw(node.args[first_star].value, raw):
            # `helper(*grad_outputs)`: its first element lands in that position
            passed.append((first_star, node.args[first_star].value))
        passed += [(k.arg, k.value) for k in node.keywords if k.arg and is_raw(k.value, raw)]
        if not passed:
            continue
        name = short(ast.unparse(passed[0][1]), 16)
        head = launched(node)
        if head is not None and inputs:
            kernel = where.find(head)
            dense = pointer_params(kernel) if is_kernel(kernel) else frozenset()
            hit = [a for i, a in passed if dense and launch_target(kernel, i) in dense]
            if hit:
                what = f"`{short(ast.unparse(hit[0]), 16)}` to `{short(ast.unparse(head), 24)}" \
                       f"[...]()`, which indexes it with row-major offsets of its own"
                return node, what, (node, what, where)
            continue
        if head is not None:
            kernel = where.find(head)
            if kernel is not None and is_kernel(kernel) or _looks_like_kernel(head):
                what = f"`{name}` to `{short(ast.unparse(head), 24)}[...]()`"
                return node, what, (node, what, where)
        what = None if inputs else where.extension_call(node, func)  # also `Fn.table[dev](...)`
        if what is not None:
            what = f"`{name}` to {what}"
            return node, what, (node, what, where)
        if depth + 1 < _DEPTH:
            inner = _through_helper(node, passed, where, depth, inputs)
            if inner is not None:
                label, launch = inner
                return node, f"`{name}` to {label}", launch
    return None


def _through_helper(call: ast.Call, passed: list, where: _Where, depth: int, inputs: bool):
    """(``helper()`` (launches a kernel), the launch) when the helper ``call`` runs hands
    the parameters it receives the gradient in to a dense kernel."""
    found = where.helper(call)
    if found is None:
        return None
    helper, there = found
    params = [a.arg for a in (*helper.args.posonlyargs, *helper.args.args)]
    names = {params[i] if isinstance(i, int) else i for i, _ in passed
             if not isinstance(i, int) or i < len(params)}
    names &= {*params, *(a.arg for a in helper.args.kwonlyargs)}
    if not names:
        return None
    key = (frozenset(names), depth, inputs)
    cache = helper.__dict__.setdefault("_gs_dense_use", {})
    if key not in cache:
        cache[key] = None  # a recursive helper ends here
        inner = _dense_use(helper, names, there, depth + 1, inputs)
        cache[key] = None if inner is None else (
            f"`{short('.'.join(dotted(call.func) or []), 24)}()` (launches a kernel)", inner[2])
    return cache[key]


__all__ = ["GS221"]
