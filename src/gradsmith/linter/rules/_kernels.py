"""GS215, GS216: custom kernels in backward, `.view` on incoming gradients (GS221, the
layout a kernel assumes, is in _contiguity.py)."""

from __future__ import annotations

import ast
import builtins
import re

from gradsmith.linter import _extensions
from gradsmith.linter._compiled import bound_values, compiled
from gradsmith.linter._facts import Facts
from gradsmith.linter._flow import Flow
from gradsmith.linter._kernels import finder, is_custom_op, is_kernel, launched
from gradsmith.linter._pairs import paired, paired_attribute
from gradsmith.linter._passed import passed_callees
from gradsmith.linter._registry import Rule, checker
from gradsmith.linter._returns import as_call, bound_calls, returned
from gradsmith.linter._symbols import dotted, module_aliases
from gradsmith.linter.rules._common import nodes, once_differentiable, own, short

_H = "import torch\nimport triton\n\n\n@triton.jit\ndef _k(X, Y):\n    tl.store(Y, tl.load(X) * 2)\n\n\n"
_CLS = "class Fn(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n" \
       "        return x * 2\n\n"
GS215 = Rule(
    "GS215", "opaque-kernel-in-backward", "warning",
    "backward runs a custom kernel (Triton launch, torch.ops, compiled extension) and is not "
    "@once_differentiable",
    "autograd cannot see inside the kernel: the gradient it returns has no graph, so a "
    "second derivative (create_graph=True, gradcheck's gradgradcheck, Hessian-vector "
    "products) is silently missing this term instead of raising.",
    "decorate backward with `@once_differentiable` (from torch.autograd.function) so double "
    "backward raises, or write backward with differentiable torch operations.",
    bad=_H + _CLS + "    @staticmethod\n    def backward(ctx, g):\n        out = torch.empty_like(g)\n"
    "        _k[(1,)](g, out)  # GS215\n        return out\n",
    good="from torch.autograd.function import once_differentiable\n" + _H + _CLS
    + "    @staticmethod\n    @once_differentiable\n    def backward(ctx, g):\n"
    "        out = torch.empty_like(g)\n        _k[(1,)](g, out)\n        return out\n",
    brief="custom kernel in backward without @once_differentiable",
)
GS216 = Rule(
    "GS216", "view-in-backward", "warning",
    "`.view(...)` on grad_output or a saved tensor in backward",
    "grad_output is non-contiguous whenever the caller transposes, slices or expands the "
    "output (and saved tensors may be views); `.view` then raises 'view size is not "
    "compatible with input tensor's size and stride'.",
    "use `.reshape(...)`, or `.contiguous().view(...)`.",
    bad="import torch\n\n\n" + _CLS + "    @staticmethod\n    def backward(ctx, g):\n"
    "        return g.view(-1).mul(2).view(g.shape)  # GS216\n",
    good="import torch\n\n\n" + _CLS + "    @staticmethod\n    def backward(ctx, g):\n"
    "        return g.reshape(-1).mul(2).reshape(g.shape)\n",
    brief="`.view` fails on a non-contiguous gradient/saved tensor",
)


@checker(GS215)
def check_opaque_backward(facts: Facts, report) -> None:
    sym = facts.sym_of[id(facts.fc.source)]
    find = finder(sym, facts.sym_of)
    functions = facts.fc.source.functions
    for method in own(facts, "backward", "vjp"):
        if once_differentiable(method):
            continue
        scope = _extensions.Scope(sym, facts.sym_of, _extensions.names(sym, facts.sym_of))
        scope = scope.with_locals(method.node)
        local = _Lazy(method.node, frozenset(scope.known))
        for node in nodes(method):
            if isinstance(node, ast.Call):
                what = _opaque(node, find, local, scope, pointers=True) or _via_local(
                    node, method.node, find, local, scope) or _via_helper(
                    node, functions, find, facts.sym_of, enclosing=method.node)
                what = what or _via_passed(facts, method, node) or _via_argument(
                    node, functions, find, facts.sym_of)
                if what:
                    report("GS215", method.source, node, what)
                    break


def _via_passed(facts: Facts, method, call: ast.Call) -> str | None:
    """``ctx.fn(...)`` where the linted calls of ``Fn.apply`` hand forward a kernel or a
    helper that runs one (``ctx.act_bwd = act_bwd``, ``Fn.apply(x, swiglu_backward)``)."""
    for arg, caller in passed_callees(facts, method, call):
        find = finder(caller, facts.sym_of)
        probe = ast.copy_location(ast.Call(func=arg, args=call.args, keywords=call.keywords),
                                  call)
        if _opaque(probe, find) or _via_one_helper(
                probe, caller.source.functions, find, facts.sym_of):
            return (f"`{short(ast.unparse(call.func), 20)}` = `{short(ast.unparse(arg), 20)}` "
                    "(apply arg)")
    return None


def _via_argument(call: ast.Call, functions: dict, find, sym_of: dict) -> str | None:
    """A linted helper handed a kernel (or a helper running one) that it calls: a template
    ``_backward_function(..., backward_op=_rmsnorm_backward_triton)`` whose body runs
    ``backward_op(...)``."""
    helper = _called_helper(call, functions, find)
    if helper is None:
        return None
    params = [a.arg for a in helper.args.posonlyargs + helper.args.args + helper.args.kwonlyargs]
    handed = [(params[i], arg) for i, arg in enumerate(call.args[:len(params)])
              if not isinstance(arg, ast.Starred)]
    handed += [(k.arg, k.value) for k in call.keywords if k.arg in params]
    called = {n.func.id for n in ast.walk(helper)
              if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    for param, arg in handed:
        if param not in called or not isinstance(arg, (ast.Name, ast.Attribute)):
            continue
        probe = ast.copy_location(ast.Call(func=arg, args=[], keywords=[]), call)
        if _opaque(probe, find) or _via_one_helper(probe, functions, find, sym_of):
            return (f"`{short(ast.unparse(call.func), 20)}()` calls `{param}` = "
                    f"`{short(ast.unparse(arg), 24)}`, a custom kernel")
    return None


#: Names native extensions are bound to (`_C`, `_backend`, `wkv_cuda`, `_nvdiffrast_c`...).
_EXTENSION = re.compile(r"^_?C$|_c$|cuda|backend|^_?ext$|_ext$|^ext_|_cpp$|plugin|_lib$", re.I)
#: Python wrappers of other packages that only run a compiled kernel (flash-attn's
#: ``_flash_attn_backward`` calls ``flash_attn_gpu.bwd``; its ``flash_attn_func`` is a
#: Function with its own backward and is not one).
_KNOWN_WRAPPER = re.compile(r"^flash_attn(\.[\w.]+)?\._(wrapped_)?flash_attn_\w*(forward|backward)$")
_BUILTINS = frozenset(dir(builtins))
_NOT_EXTENSION = frozenset({"torch", "F", "nn", "np", "numpy", "math", "triton", "tl", "ctx",
                            "self", "cls", "os", "sys", "dist"})


class _Lazy:
    """A function's parameters and local names, collected only when first asked about."""

    def __init__(self, node: ast.AST, extensions: frozenset[str]) -> None:
        self.node, self.extensions, self.names = node, extensions, None

    def __contains__(self, name: str) -> bool:
        if self.names is None:
            self.names = _assigned(self.node) - self.extensions
        return name in self.names


def _opaque(call: ast.Call, find, local=frozenset(), scope=None, pointers: bool = False
            ) -> str | None:
    head = launched(call)
    if head is not None:
        kernel = find(head)
        if kernel is not None and is_kernel(kernel) or _looks_like_kernel(head):
            return f"`{short(ast.unparse(head))}[...]()`"
        if scope is not None and _extensions.kernel_call(call, scope, local) is not None:
            return f"`{short(ast.unparse(call.func))}()`"  # `Fn.dot_backward[device](...)`
        return None
    if pointers and _raw_pointers(call):  # `ctx.moe.backward(n, x.data_ptr(), ...)`
        return f"`{short(ast.unparse(call.func))}()` (given raw pointers)"
    if scope is not None:
        how = _extensions.kernel_call(call, scope, local)
        if how is not None:  # a compiled extension
            text = ".".join(dotted(call.func) or []) or ast.unparse(call.func)
            return f"`{short(text)}()`{how}"
    parts = dotted(call.func)
    if not parts and isinstance(call.func, ast.Call):  # `_make_lazy_cuda_func("bwd")(...)`
        if compiled(call.func, find, scope.sym if scope is not None else None):
            return f"`{short(ast.unparse(call.func.func))}(...)()` (a compiled CuTe kernel)"
        inner = dotted(call.func.func)
        if inner and inner[0] not in local and _EXTENSION.search(inner[-1]):
            return f"`{short(ast.unparse(call.func))}(...)`"
    if not parts:
        return None
    if len(parts) >= 3 and parts[:2] == ["torch", "ops"] and parts[2] not in ("aten", "prims"):
        return f"`{short('.'.join(parts))}()`"  # aten/prims have autograd formulas
    if parts[-1] == "apply" and parts[-2:-1] and parts[-2][:1].isupper():
        return None  # another Function's apply: its own backward decides
    if len(parts) >= 2 and parts[0] not in local and parts[0] not in _NOT_EXTENSION and any(
        _EXTENSION.search(p) for p in parts[:-1]
    ):
        return f"`{short('.'.join(parts))}()`"  # a compiled extension's function
    external = getattr(find, "external", None)
    module = external(parts[0]) if external is not None and parts[0] not in local else None
    if module and (module.partition(".")[0] not in _NOT_EXTENSION and _EXTENSION.search(
        module.rpartition(".")[2]
    ) or _KNOWN_WRAPPER.match(f"{module}.{parts[0]}") or paired(parts, module, find)):
        return f"`{short('.'.join(parts))}()` (from `{short(module, 24)}`)"  # imported from one
    module = paired_attribute(parts, scope.sym, scope.sym_of, _NOT_EXTENSION) \
        if scope is not None and parts[0] not in local else None
    if module:  # `fused_gatconv.gat_backward(...)` beside `fused_gatconv.gat_forward(...)`
        return f"`{short('.'.join(parts))}()` (from `{short(module, 24)}`)"
    kernel = find(call.func)
    if kernel is not None and (is_kernel(kernel) or is_custom_op(kernel)):
        return f"`{short('.'.join(parts))}()`"
    return None


def _raw_pointers(call: ast.Call) -> bool:
    """``call`` hands two or more tensors' addresses (``t.data_ptr()``) to a function: only
    native code (an extension, ctypes) can use them, a kernel autograd cannot see (one
    pointer alone may be a log line or a cache key). Looked for in backward itself: a
    helper doing so is often a fast path its caller takes only when no graph is built."""
    values = (*call.args, *(k.value for k in call.keywords))
    return sum(isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute)
               and v.func.attr == "data_ptr" and not v.args for v in values) >= 2 \
        and not (isinstance(call.func, ast.Name) and call.func.id in _BUILTINS)


def _via_local(call: ast.Call, enclosing: ast.AST, find, local, scope) -> str | None:
    """``fn(...)`` where ``fn`` is a local that some assignment of ``enclosing`` binds to a
    compiled extension's function (``import fused_dense_lib as fused_dense_cuda`` in
    backward, then ``fn = fused_dense_cuda.linear_bias_wgrad`` on one branch): on that
    branch backward runs the kernel."""
    if not isinstance(call.func, ast.Name) or call.func.id not in local:
        return None
    for value in bound_values(enclosing, call.func.id):
        what = _opaque(as_call(value), find, local, scope)
        if what:
            return f"`{call.func.id}()` (bound to {what})"
    return None


def _assigned(node: ast.AST) -> frozenset[str]:
    """Parameters and local names of a function (never extension modules)."""
    names = {a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)}
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
            names.add(sub.id)
    return frozenset(names)


def _looks_like_kernel(head: ast.expr) -> bool:
    """An unresolved ``name[grid](...)``: Triton's launch syntax, kernels named as such."""
    name = head.attr if isinstance(head, ast.Attribute) else getattr(head, "id", "")
    return "kernel" in name.lower() or name.startswith("_")


#: How many helpers deep a kernel launch is looked for (backward -> mlstm_chunkwise_bw ->
#: mlstm_chunkwise__parallel_bw_dQKV -> kernel[grid]: two).
_HELPER_DEPTH = 3


def _via_helper(call: ast.Call, functions: dict, find, sym_of: dict, depth: int = 0,
                enclosing: ast.AST | None = None) -> str | None:
    """A helper (this module or an imported linted one) that runs a custom kernel, itself or
    through helpers it calls (a few levels deep); or a local of ``enclosing`` holding a
    function such a helper returns (``fn = select_impl(...)`` then ``fn(...)``); or a
    module-level name bound on any branch to such a helper (``bwd = _bwd_ext`` under an
    ``if``, ``bwd = _bwd_torch`` under its ``else``)."""
    what = _via_one_helper(call, functions, find, sym_of, depth, enclosing)
    parts = dotted(call.func)
    sym = getattr(find, "sym", None)
    if what or sym is None or not parts or len(parts) != 1 or depth >= _HELPER_DEPTH:
        return what
    for value in module_aliases(sym).get(parts[0], ())[1:]:
        probe = ast.copy_location(ast.Call(
            func=ast.parse(".".join(value), mode="eval").body, args=[], keywords=[]), call)
        if _via_one_helper(probe, functions, find, sym_of, depth):
            return f"`{parts[0]}()` (bound to `{short('.'.join(value))}`) runs a custom kernel"
    return None


def _via_one_helper(call: ast.Call, functions: dict, find, sym_of: dict, depth: int = 0,
                    enclosing: ast.AST | None = None) -> str | None:
    parts = dotted(call.func)
    helper = _called_helper(call, functions, find) if depth < _HELPER_DEPTH else None
    if helper is None:
        return _via_returned(call, enclosing, functions, find, sym_of, depth) \
            if enclosing is not None and depth < _HELPER_DEPTH else None
    # Once per helper, however many call it: (answer, depth it was found at); a "no" found
    # deeper (with fewer levels left to look) is looked at again from here.
    runs, seen = helper.__dict__.get("_gs_runs_kernel", (None, _HELPER_DEPTH))
    if runs is None or not runs and seen > depth:
        helper.__dict__["_gs_runs_kernel"] = (False, -1)  # a recursive helper ends here
        runs = _runs_kernel(helper, find, sym_of, functions, depth)
        helper.__dict__["_gs_runs_kernel"] = (runs, depth)
    return f"`{short('.'.join(parts))}()` runs a custom kernel" if runs else None


def _called_helper(call: ast.Call, functions: dict, find) -> ast.FunctionDef | None:
    """The function of the linted code ``call`` runs, when it is a helper (not a kernel or a
    custom op): one of ``functions`` by its bare name, else what ``find`` resolves."""
    parts = dotted(call.func)
    if not parts:
        return None
    helper = find(call.func)  # first: it also learns the module the helper lives in
    if helper is None and len(parts) == 1:
        helper = functions.get(parts[0])
    if not isinstance(helper, ast.FunctionDef) or is_kernel(helper) or is_custom_op(helper):
        return None
    return helper


def _context(helper: ast.FunctionDef, find, sym_of: dict, functions: dict):
    """(finder, scope, locals, functions) to read ``helper``'s calls with, in its module."""
    owner = getattr(find, "owner", lambda node: None)(helper)
    inner = finder(owner, sym_of) if owner is not None else find
    scope = None
    if owner is not None:
        scope = _extensions.Scope(owner, sym_of, _extensions.names(owner, sym_of))
        scope = scope.with_locals(helper)
        functions = owner.source.functions
    local = _Lazy(helper, frozenset(scope.known) if scope is not None else frozenset())
    return inner, scope, local, functions


def _runs_kernel(helper: ast.FunctionDef, find, sym_of: dict, functions: dict, depth: int
                 ) -> bool:
    inner, scope, local, functions = _context(helper, find, sym_of, functions)
    calls = [node for node in ast.walk(helper) if isinstance(node, ast.Call)]
    # Below the first helper only launches and extensions count: a custom torch.ops
    # namespace that far down is as likely bookkeeping (DTensor's redistribute reaches
    # torch.ops.device_mesh._get_flattened_submesh) as the gradient's kernel.
    if any(what and not (depth and what.startswith("`torch.ops."))
           for what in (_opaque(node, inner, local, scope)
                        or _via_local(node, helper, inner, local, scope) for node in calls)):
        return True
    # A helper that hands its tensors to another Function's apply (`return Fn.apply(*args)`)
    # differentiates through that Function; the helpers it calls around it prepare
    # arguments or wrap results (an autocast cast, a graph index built through a C API).
    if any(_applies(node) for node in calls):
        return False
    return any(_via_helper(node, functions, inner, sym_of, depth + 1, helper) for node in calls)


def _applies(call: ast.Call) -> bool:
    parts = dotted(call.func) or []
    return len(parts) >= 2 and parts[-1] == "apply" and parts[-2][:1].isupper()


def _via_returned(call: ast.Call, enclosing: ast.AST, functions: dict, find, sym_of: dict,
                  depth: int) -> str | None:
    """``fn(...)`` where an assignment ``fn = helper(...)`` (or an item of a
    tuple it returns) gives a function that runs a custom kernel."""
    if not isinstance(call.func, ast.Name):
        return None
    for source, index in bound_calls(enclosing, call.func.id):
        key = f"_gs_returns_kernel_{index}"
        runs = source.__dict__.get(key)
        if runs is None:
            source.__dict__[key] = False  # recursion ends here
            runs = bool(compiled(source, find, getattr(find, "sym", None)))
            helper = None if runs else _called_helper(source, functions, find)
            if helper is not None:
                inner, scope, local, inner_functions = _context(helper, find, sym_of, functions)
                runs = any(
                    _opaque(probe, inner, local, scope)
                    or _via_helper(probe, inner_functions, inner, sym_of, depth + 1)
                    for probe in map(as_call, returned(helper, index)))
            source.__dict__[key] = runs
        if runs:
            made = short(ast.unparse(source.func))
            return f"`{call.func.id}()` (from `{made}()`) runs a custom kernel"
    return None


@checker(GS216)
def check_view_in_backward(facts: Facts, report) -> None:
    for method in own(facts, "backward", "vjp"):
        contiguous: set[str] = set()

        def visit(stmt, flow: Flow, method=method, contiguous=contiguous):
            for node in _calls(stmt):
                func = node.func
                if not (isinstance(func, ast.Attribute) and func.attr == "view"):
                    continue
                if _dtype_view(node) or _made_contiguous(func.value, contiguous):
                    continue
                val = flow.eval(func.value)
                if val.tensor is not False and ({"grad", "saved"} & val.origins):
                    label = short(method.source.segment(func.value) or "tensor")
                    report("GS216", method.source, node, f"`{label}.view(...)`")
            if isinstance(stmt, ast.Assign):
                for target in stmt.targets:
                    if isinstance(target, ast.Name):
                        contiguous.discard(target.id)
                        if _made_contiguous(stmt.value, contiguous):
                            contiguous.add(target.id)

        facts.walk(method, visit)


def _calls(stmt: ast.stmt):
    from gradsmith.linter._facts import statement_nodes

    for node in statement_nodes(stmt):
        if isinstance(node, ast.Call):
            yield node


def _made_contiguous(expr: ast.expr, names: set[str]) -> bool:
    if isinstance(expr, ast.Name):
        return expr.id in names
    return isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and (
        expr.func.attr in ("contiguous", "reshape", "clone", "flatten", "view")
        or any(k.arg == "memory_format" for k in expr.keywords))


def _dtype_view(call: ast.Call) -> bool:
    """``x.view(torch.int32)``: a dtype view works on any layout."""
    if len(call.args) != 1 or call.keywords:
        return bool(call.keywords) and all(k.arg == "dtype" for k in call.keywords)
    arg = call.args[0]
    parts = dotted(arg)
    return bool(parts) and (parts[0] in ("torch", "tl") or "dtype" in parts[-1])


__all__ = ["GS215", "GS216"]
