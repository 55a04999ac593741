"""Whether the callers a Function has in the linted code use an input again after the call.

An input forward changes in place harms whoever reads it afterwards: the caller, or an
operation that saved it for its own backward. When every call in the linted code hands over
a value nothing reads after the call (a fresh result such as ``F.linear(...)``, or a local
name or parameter the calling function does not read again, also through aliasing methods
such as ``output.float().contiguous()``), no harm is demonstrated: :func:`unread_after_calls`
says so. A call through one plain wrapper (``def ce(logits, t): return Fn.apply(logits, t)``)
is followed to the wrapper's own callers.
"""

from __future__ import annotations

import ast

from gradsmith.linter._kernels import module_named, modules_of
from gradsmith.linter._symbols import dotted

#: Methods whose result may share memory with the tensor they are called on.
_ALIASING = frozenset("""contiguous float half bfloat16 double to type view view_as reshape
    reshape_as detach flatten squeeze unsqueeze transpose t permute expand expand_as narrow
    select movedim unflatten as_strided""".split())
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
#: Operations whose backward reads the output they returned: changing it corrupts that
#: backward, so such a value is "read again" by autograd.
_SAVE_OUTPUT = frozenset("""exp exp_ expm1 exp2 sigmoid tanh softmax log_softmax relu elu selu
    celu sqrt rsqrt reciprocal logit hardtanh""".split())


def unread_after_calls(name: str, positions: set[int], sym_of: dict) -> bool:
    """True when the linted code calls ``<name>.apply`` at least once, and at every call
    the arguments at ``positions`` are values nothing reads after the call."""
    def is_apply(expr: ast.expr) -> bool:
        return _last(expr) == "apply" and isinstance(expr, ast.Attribute) \
            and _last(expr.value) == name

    if not _only_applied(name, sym_of):
        return False
    sites = _callers(f"{name}.apply", "apply", is_apply, sym_of)  # also `fn = Fn.apply`
    sites = _outside(name, sites or [], sym_of)
    if not sites:
        return False
    for call, func in sites:
        for position in positions:
            arg = _argument(call, position)
            if arg is None:
                return False
            wrapper = _wrapper_parameter(arg, func, call)
            if wrapper is not None:  # a wrapper passing its parameter straight on
                if not _wrapper_unread(func, wrapper, sym_of):
                    return False
            elif not _unread(arg, func, call):
                return False
    return True


def _aliases(needle: str, key: str, match, sym_of: dict) -> list | None:
    """Matchers of the calls that run ``match``'s target (whose last name is ``key``) under
    another name: ``X = <it>`` (with the module binding it, when at module level),
    ``self.x = <it>`` (also one side of a conditional) called as ``self.x(...)``: (name,
    owner, module). None when it is used as a value any other way (passed on, stored
    elsewhere), so its callers cannot be listed."""
    found: list = []
    for sym in sym_of.values():
        src = sym.source
        if needle not in src.text:
            continue
        index = _index(src)
        top = {id(stmt) for stmt in src.tree.body}
        used = {id(n) for n in index.loads.get(key, ()) if match(n)}
        if not used:
            continue
        bound: set[int] = set()
        for stmt in index.assigns:
            values = [stmt.value.body, stmt.value.orelse] if isinstance(
                stmt.value, ast.IfExp) else [stmt.value]
            hits = [v for v in values if id(v) in used]
            if not hits:
                continue
            target = stmt.targets[0]
            if isinstance(target, ast.Name):
                found.append((target.id, None, sym.module if id(stmt) in top else None))
            elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                    and target.value.id == "self":
                found.append((target.attr, "self", None))
            else:
                continue
            bound.update(id(v) for v in hits)
        if used - bound - index.called:
            return None
    return found


def _wrapper_unread(wrapper: ast.FunctionDef, param: int, sym_of: dict) -> bool:
    def is_wrapper(expr: ast.expr) -> bool:
        return _last(expr) == wrapper.name

    sites = [(call, func) for call, func in
             _callers(wrapper.name, wrapper.name, is_wrapper, sym_of) or () if func is not wrapper]
    if not sites:
        return False  # its callers are not in the linted code
    return all((arg := _argument(call, param)) is not None and _unread(arg, func, call)
               for call, func in sites)


def _outside(name: str, sites: list, sym_of: dict) -> list:
    """Sites not in a method of a class called ``name``: forward calling an extension's
    function that has the alias's name (``ext.bfs_cluster``) is not a call of the Function."""
    methods = {id(m) for sym in sym_of.values() if name in sym.source.text
               for k in sym.all_classes if k.name == name for m in k.body
               if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return [(call, func) for call, func in sites if id(func) not in methods]


def _only_applied(name: str, sym_of: dict) -> bool:
    """The class is used only through ``<name>.apply`` (and as a base class): not imported
    under another name, called directly or handed on, where calls could hide."""
    for sym in sym_of.values():
        if name not in sym.source.text:
            continue
        index = _index(sym.source)
        if name in index.renamed or any(
                id(node) not in index.applied and id(node) not in index.bases
                for node in index.loads.get(name, ())):
            return False
    return True


def _callers(needle: str, key: str, match, sym_of: dict) -> list | None:
    """Every call of what ``match`` names (its last name ``key``), directly or under an
    alias; None when some use of it hides its callers."""
    aliases = _aliases(needle, key, match, sym_of)
    if aliases is None:
        return None
    sites = _sites(needle, key, lambda call: match(call.func), sym_of)
    for name, owner, module in aliases:  # an alias is called in any file (`self.reduce(out)`)
        sites += _sites(name, name, lambda call, owner=owner: owner is None or dotted(
            call.func) == [owner, _last(call.func)], sym_of, module)
    return sites


def _sites(needle: str, key: str, match, sym_of: dict, module: str | None = None
           ) -> list[tuple[ast.Call, ast.AST | None]]:
    """Calls whose callee's last name is ``key`` and that ``match`` accepts, in the linted
    files that mention ``needle``, each with the function it is in (None at module level).
    With ``module`` (where a module-level alias ``key = Fn.apply`` is bound), calls through
    a name imported from outside the linted code (``torch.distributed.all_reduce(t)``
    beside ``all_reduce = AllReduce.apply``) are other functions, not the alias."""
    found = []
    for sym in sym_of.values():
        if needle in sym.source.text:
            found += [(call, func) for call, func in _index(sym.source).calls.get(key, ())
                      if match(call) and (module is None or not _elsewhere(call.func, sym,
                                                                          module, sym_of))]
    return found


def _elsewhere(func: ast.expr, sym, module: str, sym_of: dict) -> bool:
    """``func`` (a call's callee in ``sym``'s file) names a function of a module outside the
    linted code, so it cannot be the alias bound in ``module``. Anything that might reach
    the alias (a bare name bound in the file, a linted module, a local object) is kept."""
    parts = dotted(func)
    if not parts or sym.module == module and len(parts) == 1:
        return False
    target = sym.imports.get(parts[0])
    if target is None:
        return False
    qual = ".".join([target, *parts[1:-1]]) if len(parts) > 1 else target.rpartition(".")[0]
    if not qual or qual == module:
        return False
    modules = modules_of(sym_of)
    return not any(module_named(modules, ".".join(qual.split(".")[:cut]), sym) is not None
                   for cut in range(qual.count(".") + 1, 0, -1))


class _Index:
    """One walk of a file: its calls by callee's last name (with the function each is in),
    loads of each identifier, single-target assignments, what ``X.apply``, class bases and
    calls use, and names imported under another name."""

    def __init__(self, tree: ast.Module) -> None:
        self.calls: dict[str, list[tuple[ast.Call, ast.AST | None]]] = {}
        self.loads: dict[str, list[ast.AST]] = {}
        self.assigns: list[ast.Assign] = []
        self.applied: set[int] = set()
        self.bases: set[int] = set()
        self.called: set[int] = set()
        self.renamed: set[str] = set()
        stack: list[tuple[ast.AST, ast.AST | None]] = [(tree, None)]
        while stack:
            node, func = stack.pop()
            for child in ast.iter_child_nodes(node):
                inner = child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                    else func
                self._note(child, func)
                stack.append((child, inner))

    def _note(self, node: ast.AST, func) -> None:
        if isinstance(node, ast.Call):
            self.called.add(id(node.func))
            last = _last(node.func)
            if last is not None:
                self.calls.setdefault(last, []).append((node, func))
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            self.loads.setdefault(node.id, []).append(node)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            self.loads.setdefault(node.attr, []).append(node)
            if node.attr == "apply":
                self.applied.add(id(node.value))
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            self.assigns.append(node)
        elif isinstance(node, ast.ClassDef):
            self.bases.update(id(b) for b in node.bases)
        elif isinstance(node, ast.ImportFrom):
            self.renamed.update(a.name for a in node.names if a.asname not in (None, a.name))


def _index(src) -> _Index:
    found = src.__dict__.get("_gs_reuse_index")
    if found is None:  # once per file
        found = src.__dict__["_gs_reuse_index"] = _Index(src.tree)
    return found


def _argument(call: ast.Call, position: int) -> ast.expr | None:
    """The expression passed at ``position`` (None where a ``*args`` hides it)."""
    for i, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred):
            return None
        if i == position:
            return arg
    return None


def _wrapper_parameter(arg: ast.expr, func, call: ast.Call) -> int | None:
    """The position of ``arg`` among the parameters of a module-level function that only
    hands it to ``call`` (a plain wrapper), else None."""
    if not isinstance(arg, ast.Name) or not isinstance(func, ast.FunctionDef):
        return None
    params = [a.arg for a in (*func.args.posonlyargs, *func.args.args)]
    if arg.id not in params or params[:1] in (["self"], ["cls"]):
        return None
    reads = [n for n in ast.walk(func) if isinstance(n, ast.Name) and n.id == arg.id
             and isinstance(n.ctx, ast.Load)]
    return params.index(arg.id) if reads == [arg] else None


def _root(expr: ast.expr) -> ast.expr:
    """What ``expr`` may share memory with: ``output`` for ``output.float().contiguous()``."""
    while True:
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and \
                expr.func.attr in _ALIASING:
            expr = expr.func.value
        elif isinstance(expr, ast.Subscript):
            expr = expr.value
        elif isinstance(expr, ast.Attribute) and expr.attr in ("data", "T", "mT"):
            expr = expr.value
        else:
            return expr


def _unread(arg: ast.expr, func, call: ast.Call) -> bool:
    """Nothing reads the value ``arg`` gives after ``call``: a fresh result, or a local
    name of ``func`` no statement reachable after the call reads (a loop around the call
    reaches its whole body again)."""
    root = _root(arg)
    if isinstance(root, ast.Call):
        return not _saves_output(root)  # a fresh result: `F.linear(x, w)`
    if isinstance(root, (ast.BinOp, ast.UnaryOp)):
        return True  # `a @ b`, `x + 1`
    if not isinstance(root, ast.Name) or func is None:
        return False  # an attribute (`self.buf`), a global: others hold it
    if any(isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and _saves_output(
            _root(n.value)) and any(isinstance(t, ast.Name) and t.id == root.id
                                    for t in n.targets) for n in ast.walk(func)):
        return False  # `h = torch.sigmoid(a)`: sigmoid's backward reads h
    after = _after(func, call)
    if after is None:
        return False
    inside = {id(n) for n in ast.walk(arg)}
    statement = after[0]
    if any(isinstance(n, ast.Name) and n.id == root.id and isinstance(n.ctx, ast.Load)
           and id(n) not in inside for n in ast.walk(statement)):
        return False  # `y = Fn.apply(x) + x`
    if isinstance(statement, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == root.id for t in statement.targets):
        return True  # `out = Fn.apply(out)`: later reads see the result, not the input
    return not any(isinstance(n, ast.Name) and n.id == root.id and isinstance(n.ctx, ast.Load)
                   for stmt in after[1:] for n in ast.walk(stmt))


def _after(func: ast.AST, call: ast.Call) -> list[ast.AST] | None:
    """Statements (and loop headers) reachable after the statement holding ``call``."""
    path = _path(func.body, call)
    if path is None:
        return None
    block, index = path[-1]
    out: list[ast.AST] = [block[index]]  # the statement itself (`y = Fn.apply(x) + x`)
    for block, index in reversed(path):  # innermost block first
        out.extend(block[index + 1:])
        owner = getattr(block, "_gs_owner", None)
        if isinstance(owner, _LOOPS):
            out.extend(owner.body)
            out.append(owner.iter if isinstance(owner, (ast.For, ast.AsyncFor)) else owner.test)
    return out


class _Block(list):
    """A statement list that remembers the compound statement it belongs to."""


def _path(body: list[ast.stmt], call: ast.Call, owner=None):
    """[(block, index)] from ``body`` down to the statement that contains ``call``."""
    block = _Block(body)
    block._gs_owner = owner
    for index, stmt in enumerate(body):
        if not any(n is call for n in ast.walk(stmt)):
            continue
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, list) and inner and not isinstance(
                    stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found = _path(inner, call, stmt)
                if found is not None:
                    return [(block, index), *found]
        for handler in getattr(stmt, "handlers", ()):
            found = _path(handler.body, call, stmt)
            if found is not None:
                return [(block, index), *found]
        return [(block, index)]
    return None


def _saves_output(call: ast.expr) -> bool:
    """A torch operation whose backward reads its own output (``exp``, ``sigmoid``...)."""
    return isinstance(call, ast.Call) and _last(call.func) in _SAVE_OUTPUT


def _last(expr: ast.expr) -> str | None:
    parts = dotted(expr)
    return parts[-1] if parts else None


def call_arguments(name: str, position: int, sym_of: dict) -> list[tuple[ast.expr, ast.AST]]:
    """(argument, calling function) at ``position`` of every linted call of ``<name>.apply``
    (also through ``fn = Fn.apply``); empty when a call hides it or the callers are not all
    in sight."""
    if not _only_applied(name, sym_of):
        return []

    def is_apply(expr: ast.expr) -> bool:
        return _last(expr) == "apply" and isinstance(expr, ast.Attribute) \
            and _last(expr.value) == name

    sites = _outside(name, _callers(f"{name}.apply", "apply", is_apply, sym_of) or [], sym_of)
    found = [(_argument(call, position), func) for call, func in sites]
    return [] if any(arg is None for arg, _ in found) else found


def reachable_after(func: ast.AST, node: ast.AST) -> list[ast.AST] | None:
    """The statement holding ``node`` in ``func`` and the statements (and loop headers) that
    can run after it; None when ``node`` is not in ``func``'s body."""
    return _after(func, node)


__all__ = ["call_arguments", "reachable_after", "unread_after_calls"]
