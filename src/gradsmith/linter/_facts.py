"""Shared facts about one Function: roles of parameters, flows, dirty inputs, saves, returns."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import cached_property

from gradsmith.linter import _tensors as T
from gradsmith.linter._discovery import FunctionClass, Method
from gradsmith.linter._flow import SCALAR, Flow, Val, join, walk_shallow
from gradsmith.linter._symbols import ModuleSymbols
from gradsmith.linter._walk import header_exprs, run

#: Parameter names that (without evidence to the contrary) hold Python numbers or flags.
HYPERPARAMS = frozenset(
    """dim dims axis axes keepdim stride strides padding dilation kernel_size groups training
    inplace reduction eps epsilon momentum output_size ndim num_groups bits n_bits num_bits
    ceil_mode count_include_pad align_corners mode""".split()
)


def torchish(sym: ModuleSymbols):
    """Resolver of dotted call targets to torch-qualified names in module ``sym``."""

    def resolve(parts: list[str]) -> str | None:
        head = parts[0]
        base = sym.imports.get(head, head if head == "torch" else None)
        if base is None or not (base == "torch" or base.startswith("torch.")):
            return None
        return ".".join([base, *parts[1:]])

    return resolve


def is_ctx_call(node: ast.AST, ctx: str | None, name: str) -> bool:
    """``<ctx>.<name>(...)``."""
    return (
        ctx is not None
        and isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == name
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == ctx
    )


#: torch callables whose first argument is not (necessarily) a tensor.
_NOT_TENSOR_FIRST = frozenset(
    """tensor as_tensor asarray from_numpy full zeros ones empty rand randn randint randperm
    arange linspace logspace eye manual_seed is_tensor numel device dtype Size
    broadcast_shapes finfo iinfo set_grad_enabled no_grad enable_grad inference_mode
    get_default_dtype set_default_dtype promote_types result_type can_cast empty_strided
    scalar_tensor tril_indices triu_indices""".split()
)


def evidence(method: Method, names: list[str], ctx: str | None,
             resolve=None) -> dict[str, bool | None]:
    """Is each parameter a tensor? True/False with evidence from the body, None if unknown."""
    found: dict[str, bool | None] = dict.fromkeys(names)
    args = method.node.args
    positional = [*args.posonlyargs, *args.args]
    defaults = dict(zip([a.arg for a in positional[len(positional) - len(args.defaults):]],
                        args.defaults))
    weak_false = set()
    for arg in positional:
        if arg.arg in found and arg.annotation is not None:
            text = ast.unparse(arg.annotation)
            if "Tensor" in text:
                found[arg.arg] = True
            elif text in ("int", "float", "bool", "str"):
                found[arg.arg] = False
    for name, default in defaults.items():
        if name in found and isinstance(default, ast.Constant) and default.value is not None:
            weak_false.add(name)
    for node in walk_shallow(method.node):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            name = node.value.id
            if name in found and (node.attr in T.TENSOR_EVIDENCE or T.is_inplace_name(node.attr)):
                found[name] = True
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            for side in (node.left, node.right):
                if isinstance(side, ast.Name) and side.id in found:
                    found[side.id] = True
        elif is_ctx_call(node, ctx, "mark_dirty"):
            for arg in node.args:
                if isinstance(arg, ast.Name) and arg.id in found:
                    found[arg.id] = True
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
                and node.value.id in found and isinstance(node.slice, ast.Compare):
            found[node.value.id] = True  # boolean-mask indexing: x[x < 0]
        elif isinstance(node, ast.Return) and method.name == "forward" and node.value is not None:
            values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            for value in values:
                if isinstance(value, ast.Name) and value.id in found:
                    found[value.id] = True  # forward outputs are tensors
        elif resolve is not None and isinstance(node, ast.Call) and node.args and isinstance(
            node.args[0], ast.Name
        ) and node.args[0].id in found and _torch_tensor_call(node, resolve):
            found[node.args[0].id] = True  # torch.sigmoid(x), F.relu(x): x is a tensor
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("int", "float", "range", "bool")
        ):
            for arg in node.args:
                if isinstance(arg, ast.Name) and arg.id in found:
                    weak_false.add(arg.id)
    for name in names:
        if found[name] is None and (name in weak_false or name in HYPERPARAMS):
            found[name] = False
    return found


def _torch_tensor_call(node: ast.Call, resolve) -> bool:
    from gradsmith.linter._symbols import dotted

    parts = dotted(node.func)
    qual = resolve(parts) if parts else None
    if not qual:
        return False
    module, _, name = qual.rpartition(".")
    return module in T.TENSOR_MODULES | {"torch.linalg"} and name not in _NOT_TENSOR_FIRST


@dataclass
class Facts:
    """Everything the rules share about one :class:`FunctionClass` (computed lazily)."""

    fc: FunctionClass
    sym_of: dict  # id(SourceFile) -> ModuleSymbols
    _envs: dict[int, dict[str, Val]] = field(default_factory=dict)

    def method(self, name: str) -> Method | None:
        m = self.fc.methods.get(name)
        if name == "backward" and m is None:
            m = self.fc.methods.get("vjp")
        return m

    def ctx_of(self, method: Method) -> str | None:
        if method.name == "forward" and self.fc.setup_style:
            return None
        params = method.params
        if params:
            return params[0]
        return method.node.args.vararg.arg if method.node.args.vararg else None

    def resolver(self, method: Method):
        return torchish(self.sym_of[id(method.source)])

    @cached_property
    def inputs(self) -> tuple[list[str], int, bool] | None:
        return self.fc.inputs()

    def initial_env(self, method: Method) -> dict[str, Val]:
        """Values of a method's parameters according to their role (a fresh copy)."""
        key = id(method.node)
        if key not in self._envs:
            self._envs[key] = self._initial_env(method)
        return dict(self._envs[key])

    def _initial_env(self, method: Method) -> dict[str, Val]:
        env: dict[str, Val] = {}
        params = method.params
        vararg = method.node.args.vararg
        if method.name == "forward":
            names = params if self.fc.setup_style else params[1:]
            ev = evidence(method, names, self.ctx_of(method), self.resolver(method))
            for name in names:
                env[name] = Val(frozenset({f"input:{name}"}), ev[name], single=ev[name] is True)
            if vararg:
                env[vararg.arg] = Val(frozenset({"input:*"}), False)
        elif method.name in ("backward", "vjp"):
            for name in params[1:]:
                env[name] = Val(frozenset({"grad"}), True, single=True)
            if vararg:
                env[vararg.arg] = Val(frozenset({"grad"}), False)
        elif method.name == "setup_context" and len(params) >= 3:
            inputs = self.inputs
            elements = None
            if inputs and not inputs[2] and inputs[1] == 0:
                fwd = self.method("forward")
                ev = evidence(fwd, inputs[0], None, self.resolver(fwd)) if fwd else {}
                elements = tuple(
                    Val(frozenset({f"input:{n}"}), ev.get(n), single=ev.get(n) is True)
                    for n in inputs[0]
                )
            env[params[1]] = Val(frozenset({"input:*"}), False, elements)
            env[params[2]] = self.output_val
        return env

    @cached_property
    def output_val(self) -> Val:
        """What setup_context's ``output`` holds, from forward's return statements."""
        fwd = self.method("forward")
        unknown = Val(frozenset({"output"}), None)
        if fwd is None:
            return unknown
        vals = []

        def visit(stmt, flow):
            if isinstance(stmt, ast.Return):
                vals.append(flow.eval(stmt.value) if stmt.value is not None else SCALAR)

        self.walk(fwd, visit)
        if not vals:
            return unknown
        acc = vals[0]
        for v in vals[1:]:
            acc = join(acc, v)
        out = frozenset({"output"})
        if acc.elements is not None:
            return Val(out, False, tuple(Val(out, e.tensor, single=bool(e.tensor)) for e in acc.elements))
        return Val(out, acc.tensor, single=bool(acc.tensor))

    def flow(self, method: Method) -> Flow:
        """A fresh :class:`Flow` positioned at the start of ``method``."""
        flow = Flow(self.ctx_of(method), self.resolver(method))
        flow.env = self.initial_env(method)
        return flow

    def walk(self, method: Method, visit) -> Flow:
        """Run the data flow over ``method``'s body, calling ``visit(stmt, flow)``."""
        flow = self.flow(method)
        run(flow, method.node.body, visit)
        return flow

    # -- derived facts ---------------------------------------------------------------------
    @cached_property
    def dirty(self) -> tuple[set[str], bool]:
        """Inputs passed to ``ctx.mark_dirty`` and whether some could not be resolved."""
        names: set[str] = set()
        unknown = False
        for mname in ("forward", "setup_context"):
            method = self.method(mname)
            if method is None:
                continue
            ctx = self.ctx_of(method)

            def visit(stmt, flow, ctx=ctx):
                nonlocal unknown
                for node in statement_nodes(stmt):
                    if is_ctx_call(node, ctx, "mark_dirty"):
                        for arg in node.args:
                            origins = flow.eval(arg).origins if not isinstance(
                                arg, ast.Starred) else frozenset()
                            inputs = {o[6:] for o in origins if o.startswith("input:")}
                            if not inputs or "*" in inputs:
                                unknown = True
                            names.update(inputs)

            self.walk(method, visit)
        return names, unknown

    @cached_property
    def saves(self) -> list[ast.Call]:
        """``ctx.save_for_backward`` calls in forward/setup_context."""
        calls = []
        for mname in ("forward", "setup_context"):
            method = self.method(mname)
            if method is not None:
                ctx = self.ctx_of(method)
                calls += [n for n in walk_shallow(method.node) if is_ctx_call(n, ctx, "save_for_backward")]
        return calls


def statement_nodes(stmt: ast.stmt):
    """Nodes evaluated by ``stmt`` itself (header only for compound statements)."""
    for part in header_exprs(stmt):
        yield from walk_shallow(part)


__all__ = ["Facts", "SCALAR", "evidence", "is_ctx_call", "statement_nodes", "torchish"]
