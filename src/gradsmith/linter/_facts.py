"""Shared facts about one Function: roles of parameters, flows, dirty inputs, saves, returns."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import cached_property

from gradsmith.linter._callsites import apply_counts, call_site_tensors
from gradsmith.linter._discovery import FunctionClass, Method
from gradsmith.linter._evidence import evidence
from gradsmith.linter._flow import SCALAR, Flow, Val, join, walk_shallow
from gradsmith.linter._symbols import ModuleSymbols
from gradsmith.linter._walk import header_exprs, run


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
            ev = evidence(method, names, self.ctx_of(method), self.resolver(method),
                          passed=self.passed_tensors)
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
                ev = evidence(fwd, inputs[0], None, self.resolver(fwd),
                              passed=self.passed_tensors) if fwd else {}
                elements = tuple(
                    Val(frozenset({f"input:{n}"}), ev.get(n), single=ev.get(n) is True)
                    for n in inputs[0]
                )
            env[params[1]] = Val(frozenset({"input:*"}), False, elements)
            env[params[2]] = self.output_val
        return env

    @cached_property
    def passed_tensors(self) -> frozenset[str]:
        """Inputs with a number as default that some linted call site passes a tensor for.

        Only those defaults are weak evidence worth overturning, so only Functions that
        have them pay for reading their call sites (files that mention ``Name.apply``).
        """
        fwd, inputs = self.method("forward"), self.inputs
        if fwd is None or inputs is None or inputs[2]:
            return frozenset()
        params, ndefault, _ = inputs
        defaults = fwd.node.args.defaults[len(fwd.node.args.defaults) - ndefault:] if ndefault else []
        numeric = {params[len(params) - ndefault + i] for i, d in enumerate(defaults)
                   if isinstance(d, ast.Constant) and isinstance(d.value, (int, float))
                   and not isinstance(d.value, bool)}
        if not numeric:
            return frozenset()
        return frozenset(call_site_tensors(self.fc.name, params, numeric, self.sym_of, torchish))

    @cached_property
    def apply_counts(self) -> set[int | None]:
        """Argument counts of the linted ``Name.apply(...)`` calls (for ``*args`` forwards)."""
        return apply_counts(self.fc.name, self.sym_of)

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
        if method.name in ("backward", "vjp", "jvp"):
            flow.saved = self.saved_elements
            flow.layouts = self.saved_layouts if flow.saved is None else None
        return flow

    @cached_property
    def saved_elements(self) -> tuple[Val, ...] | None:
        """What backward unpacks from ``ctx.saved_tensors`` when forward saves exactly once.

        Each element's origin is ``saved`` for inputs, outputs and anything else, and
        ``saved:fresh`` for intermediates computed in forward and not returned (modifying
        those in backward corrupts nothing the caller holds).
        """
        layouts = self.saved_layouts
        return next(iter(layouts.values())) if layouts and len(layouts) == 1 and len(
            self._save_calls) == 1 else None

    @cached_property
    def saved_layouts(self) -> dict[int, tuple[Val, ...]] | None:
        """What backward unpacks from ``ctx.saved_tensors``, by the number of names, when
        every save forward makes on a branch is known item by item (an intermediate only
        where every save of that length has one at that position)."""
        calls = self._save_calls
        if not calls or any(None in c for c in calls):
            return None
        layouts = {}
        for length in {len(c) for c in calls}:
            same = [c for c in calls if len(c) == length]
            layouts[length] = tuple(Val(_saved_origins([c[i] for c in same]), True, single=True)
                                    for i in range(length))
        return layouts

    @cached_property
    def _save_calls(self) -> list[list[str | None]]:
        """The kind of each argument of each save forward makes (None: unknown)."""
        calls = []
        for name in ("forward", "setup_context"):
            method = self.method(name)
            if method is None:
                continue
            returned = {n.id for r in walk_shallow(method.node) if isinstance(r, ast.Return)
                        for n in (_elements(r.value) or [r.value]) if isinstance(n, ast.Name)}

            def visit(stmt, flow, method=method, returned=returned):
                for node in statement_nodes(stmt):
                    args = self.saved_args(node, flow.ctx)
                    if args is not None:
                        calls.append([_saved_kind(flow, a, returned, self.none_gradients)
                                      for a in args])

            self.walk(method, visit)
        return calls

    def saved_args(self, node: ast.AST, ctx: str | None) -> list[ast.expr] | None:
        """What ``node`` saves: the arguments of ``ctx.save_for_backward(...)``, or those a
        helper receiving ctx saves (see `_saved_via_helper`); None when it saves nothing."""
        if is_ctx_call(node, ctx, "save_for_backward"):
            return list(node.args)
        return self._saved_via_helper(node, ctx)

    def _saved_via_helper(self, node: ast.AST, ctx: str | None) -> list[ast.expr] | None:
        """Arguments of ``node`` that the helper it calls hands to ``ctx.save_for_backward``
        (``save(ctx, dx)`` whose body does ``ctx.save_for_backward(*args)``), an unknown item
        (a ``Starred``) where the call cannot say which; None when it is no such call.

        The helper may live in this module or another linted one.
        """
        if ctx is None or not isinstance(node, ast.Call) or not isinstance(
                node.func, (ast.Name, ast.Attribute)):
            return None
        at = [i for i, a in enumerate(node.args) if isinstance(a, ast.Name) and a.id == ctx]
        if not at:  # ctx not handed over: no lookup of the callee (forward's every call)
            return None
        helper = self.fc.source.functions.get(node.func.id) if isinstance(
            node.func, ast.Name) else None
        if helper is None:
            from gradsmith.linter._kernels import finder

            helper = finder(self.sym_of[id(self.fc.source)], self.sym_of)(node.func)
        if not isinstance(helper, ast.FunctionDef):
            return None
        params = [a.arg for a in (*helper.args.posonlyargs, *helper.args.args)]
        if at[0] >= len(params):
            return None
        saves = [n for n in walk_shallow(helper) if is_ctx_call(n, params[at[0]],
                                                                 "save_for_backward")]
        if len(saves) != 1:
            return None if not saves else [ast.Starred(ast.Constant(None))]
        vararg = helper.args.vararg.arg if helper.args.vararg else None
        given = node.args if not any(isinstance(a, ast.Starred) for a in node.args) else None
        out: list[ast.expr] = []
        for arg in saves[0].args:
            if isinstance(arg, ast.Starred) and isinstance(arg.value, ast.Name) \
                    and arg.value.id == vararg and given is not None:
                out += given[len(params):]
            elif isinstance(arg, ast.Name) and arg.id in params and given is not None \
                    and params.index(arg.id) < len(given):
                out.append(given[params.index(arg.id)])
            else:
                kw = next((k.value for k in node.keywords if isinstance(arg, ast.Name)
                           and k.arg == arg.id), None)
                out.append(kw if kw is not None else ast.Starred(ast.Constant(None)))
        return out

    @cached_property
    def none_gradients(self) -> set[str]:
        """Forward inputs whose gradient is a literal None in every return of backward."""
        inputs = self.inputs
        if inputs is None:
            return set()
        slots = self.none_slots
        return {name for i, name in enumerate(inputs[0]) if i in slots}

    @cached_property
    def none_slots(self) -> set[int]:
        """Positions of forward's inputs whose gradient is a literal None in every return of
        backward (also past named parameters, for ``forward(ctx, *args)``)."""
        bwd = self.method("backward")
        if bwd is None:
            return set()
        tuples = _tuple_names(bwd.node)
        rets = [_elements(_expand_starred(n.value, tuples)) for n in walk_shallow(bwd.node)
                if isinstance(n, ast.Return)]
        if not rets or any(r is None for r in rets):
            return set()
        return {i for i in range(min(map(len, rets)))
                if all(isinstance(r[i], ast.Constant) and r[i].value is None for r in rets)}

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
                    marked = node.args if is_ctx_call(node, ctx, "mark_dirty") else (
                        self._dirty_via_helper(node, ctx))
                    if marked:
                        for arg in marked:
                            origins = flow.eval(arg).origins if not isinstance(
                                arg, ast.Starred) else frozenset()
                            inputs = {o[6:] for o in origins if o.startswith("input:")}
                            if not inputs or "*" in inputs:
                                unknown = True
                            names.update(inputs)

            self.walk(method, visit)
        return names, unknown

    def _dirty_via_helper(self, node: ast.AST, ctx: str | None, depth: int = 0) -> list[ast.expr]:
        """Arguments of ``node`` that a same-module helper receiving ctx marks dirty.

        ``_inplace_op(ctx, x)`` whose body calls ``ctx.mark_dirty(x)`` declares the change as
        surely as forward itself would (followed a few helpers deep, like in-place edits).
        """
        if ctx is None or depth > 3 or not isinstance(node, ast.Call) \
                or not isinstance(node.func, ast.Name):
            return []
        helper = self.fc.source.functions.get(node.func.id)
        if helper is None:
            return []
        params = [a.arg for a in (*helper.args.posonlyargs, *helper.args.args)]
        pos = [i for i, a in enumerate(node.args) if isinstance(a, ast.Name) and a.id == ctx]
        pos += [params.index(k.arg) for k in node.keywords if k.arg in params
                and isinstance(k.value, ast.Name) and k.value.id == ctx]
        if not pos or pos[0] >= len(params):
            return []
        inner_ctx = params[pos[0]]
        out: list[ast.expr] = []
        for inner in walk_shallow(helper):
            marked = inner.args if is_ctx_call(inner, inner_ctx, "mark_dirty") else (
                self._dirty_via_helper(inner, inner_ctx, depth + 1))
            for arg in marked:
                if isinstance(arg, ast.Name) and arg.id in params:
                    index = params.index(arg.id)
                    if index < len(node.args):
                        out.append(node.args[index])
                        continue
                    kw = next((k.value for k in node.keywords if k.arg == arg.id), None)
                    if kw is not None:
                        out.append(kw)
                        continue
                out.append(ast.Starred(ast.Constant(None)))  # cannot say which: unknown
        return out

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


def _tuple_names(func: ast.AST) -> dict[str, ast.Tuple]:
    """Locals of ``func`` bound once, to a tuple display (``empty = None, None``)."""
    bound: dict[str, list[ast.expr]] = {}
    for node in walk_shallow(func):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        bound.setdefault(name.id, []).append(node.value)
    return {k: v[0] for k, v in bound.items() if len(v) == 1 and isinstance(v[0], ast.Tuple)
            and not any(isinstance(e, ast.Starred) for e in v[0].elts)}


def _expand_starred(expr: ast.expr | None, tuples: dict[str, ast.Tuple]) -> ast.expr | None:
    """``(g, *empty)`` with ``empty`` bound to a tuple display, as the flat tuple it returns."""
    if not isinstance(expr, ast.Tuple) or not any(
            isinstance(e, ast.Starred) and isinstance(e.value, ast.Name) and e.value.id in tuples
            for e in expr.elts):
        return expr
    elts: list[ast.expr] = []
    for e in expr.elts:
        if isinstance(e, ast.Starred) and isinstance(e.value, ast.Name) and e.value.id in tuples:
            elts.extend(tuples[e.value.id].elts)
        else:
            elts.append(e)
    return ast.Tuple(elts=elts, ctx=ast.Load())


def _elements(expr: ast.expr | None) -> list[ast.expr] | None:
    """Items of a returned tuple display, also ``(None, None) + (g,)``; None if unknown."""
    if isinstance(expr, ast.Tuple):
        return None if any(isinstance(e, ast.Starred) for e in expr.elts) else list(expr.elts)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        left, right = _elements(expr.left), _elements(expr.right)
        if left is not None and right is not None:
            return left + right
        if left is not None:  # (None, None) + Fn.apply(...): the known leading items
            return left
    return None


def _saved_origins(kinds: list[str | None]) -> frozenset[str]:
    """Origins of one unpacked slot given the kind saved there by each save of its length:
    a state buffer stays ``saved`` too, so every rule about saved tensors still sees it."""
    if all(k == "saved:fresh" for k in kinds):
        return frozenset({"saved:fresh"})
    if all(k == "saved:state" for k in kinds):
        return frozenset({"saved", "saved:state"})
    return frozenset({"saved"})


def _saved_kind(flow: Flow, arg: ast.expr, returned: set[str],
                state: set[str] = frozenset()) -> str | None:
    """``saved:state`` for an input whose gradient backward always returns as None (a
    statistics buffer), ``saved`` for other inputs and outputs, ``saved:fresh`` for
    intermediates, None when unknown."""
    if isinstance(arg, ast.Starred):
        return None
    val = flow.eval(arg)
    if val.origins and all(o.startswith("input:") and o[6:] in state for o in val.origins) \
            and not (isinstance(arg, ast.Name) and arg.id in returned):
        return "saved:state"
    if any(o.startswith("input:") or o == "output" for o in val.origins):
        return "saved"
    if isinstance(arg, ast.Name) and arg.id in returned:
        return "saved"
    if isinstance(arg, ast.Constant):
        return "saved:fresh"
    return "saved:fresh" if not val.origins else "saved"


def statement_nodes(stmt: ast.stmt):
    """Nodes evaluated by ``stmt`` itself (header only for compound statements)."""
    for part in header_exprs(stmt):
        yield from walk_shallow(part)


__all__ = ["Facts", "SCALAR", "evidence", "is_ctx_call", "statement_nodes", "torchish"]
