"""GS250, GS251: backward returns None, on every path, for a floating input that forward uses
to compute its output (a learnable embedding passed to blocks that forward runs itself)."""

from __future__ import annotations

import ast

from gradsmith.linter._callsites import linted_applies
from gradsmith.linter._evidence import evidence, integer_tensor
from gradsmith.linter._facts import Facts
from gradsmith.linter._flow import walk_shallow
from gradsmith.linter._registry import Rule, checker
from gradsmith.linter._symbols import dotted
from gradsmith.linter.rules._common import own, short, trivial
from gradsmith.linter.rules._unread_star import used_as_integers

_FN = (
    "class AddPos(torch.autograd.Function):\n    @staticmethod\n"
    "    def forward(ctx, x, pos):\n        return x + pos\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n"
)
_MOD = (
    "\n\nclass Embed(torch.nn.Module):\n    def __init__(self, n):\n        super().__init__()\n"
    "        self.pos = torch.nn.Parameter(torch.zeros(n))\n\n"
    "    def forward(self, x):\n        return AddPos.apply(x, self.pos)\n"
)
_WHY = (
    "Autograd gives the input exactly what backward returns in its slot: None means no "
    "gradient at all, so a parameter (or whatever computed the tensor) that reaches the "
    "output only through this Function is silently never trained by it, while the "
    "Function looks differentiable and the loss still falls through the other inputs."
)
_FIX = (
    "return the input's gradient (recompute the part of forward it enters under "
    "`torch.enable_grad()` and differentiate it, as for the other inputs); if no gradient "
    "is meant, pass it detached (`pos.detach()`) so that the choice is visible at the call."
)
GS250 = Rule(
    "GS250", "dropped-parameter-gradient", "error",
    "backward returns None on every path for an input that forward uses to compute its "
    "output, and a linted call passes a parameter (`nn.Parameter`, or a tensor created "
    "with `requires_grad=True`) in that slot",
    _WHY + " Here the call site shows the harm: the parameter it passes never gets a "
    "gradient through this call (its `.grad` stays None unless another path reaches it).",
    _FIX,
    bad="import torch\n\n\n" + _FN + "        return g, None  # GS250\n" + _MOD,
    good="import torch\n\n\n" + _FN + "        return g, g\n" + _MOD,
    brief="a parameter passed here never gets a gradient",
)
_RUN = (
    "import torch\n\n\nclass RunBlocks(torch.autograd.Function):\n    @staticmethod\n"
    "    def forward(ctx, x, blocks, pos):\n        ctx.save_for_backward(x, pos.detach())\n"
    "        ctx.blocks = blocks\n        for block in blocks:\n            x = block(x, pos)\n"
    "        return x\n\n    @staticmethod\n    def backward(ctx, g):\n"
    "        x, pos = ctx.saved_tensors\n        with torch.enable_grad():\n"
    "            x = x.detach().requires_grad_()\n"
)
GS251 = Rule(
    "GS251", "dropped-input-gradient", "warning",
    "backward returns None on every path for a tensor input that forward hands to a "
    "callable it was given (`for block in blocks: x = block(x, pos)`, `run_function(x, pos)`)",
    _WHY + " The callable is user code that autograd would differentiate, so the input's "
    "gradient is backward's to give. No linted call shows that a trainable tensor is passed "
    "there (a warning: right when callers never pass one that requires grad).",
    _FIX,
    bad=_RUN + "            out = x\n            for block in ctx.blocks:\n"
    "                out = block(out, pos)\n            (dx,) = torch.autograd.grad(out, x, g)\n"
    "        return dx, None, None  # GS251\n",
    good=_RUN + "            pos = pos.detach().requires_grad_()\n            out = x\n"
    "            for block in ctx.blocks:\n                out = block(out, pos)\n"
    "            dx, dpos = torch.autograd.grad(out, (x, pos), g)\n"
    "        return dx, None, dpos\n",
    brief="an input handed to user code in forward never gets a gradient",
)

#: Reads of a tensor that carry no value into a result (its shape, kind, place, identity).
_META_ATTRS = frozenset(
    """shape dtype device ndim is_cuda requires_grad layout is_sparse is_contiguous size dim
    numel stride data_ptr element_size nelement get_device storage_offset""".split())
#: Calls whose result carries no gradient from their arguments.
_META_CALLS = frozenset({"len", "isinstance", "type", "id", "hasattr", "getattr", "str", "int",
                         "bool", "print"})
#: Methods that cut the value off (results of no gradient, or integers).
_CUT_METHODS = frozenset(
    {"detach", "long", "int", "bool", "tolist", "item", "argmax", "argmin", "nonzero",
     "sign", "floor", "ceil", "round", "eq", "ne", "gt", "lt", "ge", "le"})
#: torch functions that read one argument as indices or a mask.
_INDEX_USES = frozenset(
    """gather scatter scatter_add scatter_reduce index_select index_add index_copy
    index_fill index_put take take_along_dim embedding embedding_bag one_hot bincount
    masked_fill masked_select masked_scatter where searchsorted bucketize segment_reduce
    nll_loss cross_entropy""".split())


@checker(GS250, GS251)
def check_dropped_gradient(facts: Facts, report) -> None:
    inputs, forward = facts.inputs, facts.method("forward")
    if inputs is None or inputs[2] or forward is None or facts.fc.setup_style:
        return
    backwards = list(own(facts, "backward"))
    if not backwards or trivial(backwards[0].node.body) or _side_channel(backwards[0].node):
        return
    params, slots = inputs[0], facts.none_slots
    if not slots or len(slots) >= len(params):
        return  # a backward that gives no input a gradient says so on purpose
    ev = None
    for index in sorted(slots):
        if index >= len(params):
            break
        name = params[index]
        if integer_tensor(forward, name) or used_as_integers(forward, ast.Name(name)) \
                or _index_use(forward.node, name) or not _reaches_output(forward.node, name):
            continue
        harmed = _trainable_at_call(facts.fc.name, index, facts.sym_of)
        if harmed is None:
            if not _into_passed_callable(forward.node, name, params):
                continue
            if ev is None:
                ev = evidence(forward, params, facts.ctx_of(forward), facts.resolver(forward),
                              returned=False, passed=facts.passed_tensors, by_name=True)
            if ev.get(name) is not True:
                continue
        where = _none_element(backwards[0].node, index)
        if where is None or _detached_everywhere(facts.fc.name, index, facts.sym_of):
            continue
        if harmed is not None:
            report("GS250", backwards[0].source, where,
                   f"`{short(name, 24)}`, passed `{short(harmed, 32)}`")
        else:
            report("GS251", backwards[0].source, where, f"`{short(name, 24)}`")


def _side_channel(node: ast.AST) -> bool:
    """backward writes some gradient itself (``w.grad += ...``, ``main_grad``)."""
    nodes = walk_shallow(node)
    called = {id(n.func) for n in nodes if isinstance(n, ast.Call)}
    return any(isinstance(n, ast.Attribute) and n.attr in ("grad", "main_grad")
               and id(n) not in called for n in nodes)


def _index_use(func: ast.AST, name: str) -> bool:
    """``name`` is handed to a torch function that reads indices or a mask."""
    for node in walk_shallow(func):
        if isinstance(node, ast.Call):
            last = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(
                node.func, "id", None)
            if last in _INDEX_USES and any(isinstance(a, ast.Name) and a.id == name for a in [
                    *node.args, *(k.value for k in node.keywords)]):
                return True
    return False


def _reads(expr: ast.AST | None, names: set[str]) -> bool:
    """``expr`` computes its value from one of ``names`` (not only from its metadata)."""
    if expr is None:
        return False
    if isinstance(expr, ast.Name):
        return expr.id in names
    if isinstance(expr, ast.Attribute) and expr.attr in _META_ATTRS:
        return False
    if isinstance(expr, ast.Compare):
        return False
    if isinstance(expr, ast.IfExp):
        return _reads(expr.body, names) or _reads(expr.orelse, names)
    if isinstance(expr, ast.Call):
        func = expr.func
        if isinstance(func, ast.Name) and func.id in _META_CALLS:
            return False
        if isinstance(func, ast.Attribute) and func.attr in _META_ATTRS | _CUT_METHODS:
            return False
    if isinstance(expr, ast.Subscript):
        return _reads(expr.value, names)
    return any(_reads(child, names) for child in ast.iter_child_nodes(expr))


def _reaches_output(func: ast.FunctionDef, name: str) -> bool:
    """A value forward returns is computed from ``name`` (through local assignments)."""
    tainted = _derived(func, name)
    return any(isinstance(n, ast.Return) and _reads(n.value, tainted) for n in walk_shallow(func))


def _into_passed_callable(func: ast.FunctionDef, name: str, params: list[str]) -> bool:
    """Forward hands ``name`` itself to a callable that is another of its inputs (``for
    block in blocks: x = block(x, pos)``, ``run_function(x, pos)``): user code that autograd
    would differentiate, so the input's gradient is backward's to give. (A value only
    computed from it, ``act(x @ w)``, is the frozen-base-weight pattern of LoRA kernels.)"""
    callables: set[str] = set()
    for other in params:
        if other != name:
            callables |= _derived(func, other, values=False)
    aliases = _derived(func, name, values=False)
    for node in walk_shallow(func):
        if not isinstance(node, ast.Call):
            continue
        base = node.func
        if isinstance(base, ast.Attribute) and base.attr in ("forward", "__call__"):
            base = base.value  # `block.forward(x, pos)`; other methods are the object's API
        while isinstance(base, ast.Subscript):
            base = base.value
        if isinstance(base, ast.Name) and base.id in callables and any(
                _alias(a, aliases) for a in [*node.args, *(k.value for k in node.keywords)]):
            return True
    return False


def _derived(func: ast.FunctionDef, name: str, values: bool = True) -> set[str]:
    """Local names computed from ``name`` (``values=False``: only aliases, items and loop
    variables of it: ``block`` in ``for block in blocks``, ``fn = blocks[0]``)."""
    nodes = walk_shallow(func)
    binds = [n for n in nodes if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign,
                                                ast.For, ast.NamedExpr))]
    tainted = {name}
    for _ in range(8):  # a short fixpoint: chains of locals are short
        before = len(tainted)
        for node in binds:
            value = node.iter if isinstance(node, ast.For) else node.value
            if _reads(value, tainted) if values else _alias(value, tainted):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                tainted |= {n for tgt in targets for n in _bound(tgt)}
        if len(tainted) == before:
            break
    return tainted


def _bound(target: ast.expr) -> list[str]:
    """Local names a target binds (a slot of a local buffer binds the buffer; attributes of
    ``ctx`` or ``self`` bind no local)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for e in target.elts for n in _bound(e)]
    if isinstance(target, ast.Starred):
        return _bound(target.value)
    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
        return [target.value.id]
    return []


def _alias(expr: ast.expr | None, names: set[str]) -> bool:
    while isinstance(expr, ast.Subscript):
        expr = expr.value
    if isinstance(expr, ast.Call) and getattr(expr.func, "id", None) in ("enumerate", "reversed",
                                                                          "zip") and expr.args:
        return any(_alias(a, names) for a in expr.args)
    return isinstance(expr, ast.Name) and expr.id in names


def _none_element(func: ast.AST, index: int) -> ast.AST | None:
    """The literal None in slot ``index`` of backward's first return."""
    for node in walk_shallow(func):
        if isinstance(node, ast.Return) and isinstance(node.value, (ast.Tuple, ast.List)):
            elts = node.value.elts
            if index < len(elts) and not any(isinstance(e, ast.Starred) for e in elts[:index]):
                return elts[index]
            return node
    return None


def _trainable_at_call(name: str, index: int, sym_of: dict) -> str | None:
    """The source text of a trainable tensor some linted ``name.apply`` call passes at
    ``index``: ``self.w`` where the class assigns ``self.w = nn.Parameter(...)``, or a
    ``nn.Parameter(...)`` / ``...(requires_grad=True)`` call."""
    for call, sym in linted_applies(name, sym_of.values()):
        if any(isinstance(a, ast.Starred) for a in call.args[:index + 1]) \
                or index >= len(call.args):
            continue
        arg = call.args[index]
        if _trainable_call(arg):
            return ast.unparse(arg)
        if isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name) \
                and arg.value.id == "self" and arg.attr in _parameters_of(sym.source, call):
            return ast.unparse(arg)
    return None


def _detached_everywhere(name: str, index: int, sym_of: dict) -> bool:
    """Every linted ``name.apply`` call passes ``t.detach()`` at ``index``: no gradient is
    meant, and the call says so."""
    calls = [c for c, _ in linted_applies(name, sym_of.values())]
    return bool(calls) and all(
        index < len(c.args) and isinstance(c.args[index], ast.Call)
        and isinstance(c.args[index].func, ast.Attribute) and c.args[index].func.attr == "detach"
        for c in calls)


def _trainable_call(expr: ast.expr) -> bool:
    if not isinstance(expr, ast.Call):
        return False
    parts = dotted(expr.func)
    if parts and parts[-1] == "Parameter":
        return not any(k.arg == "requires_grad" and isinstance(k.value, ast.Constant)
                       and k.value.value is False for k in expr.keywords)
    return any(k.arg == "requires_grad" and isinstance(k.value, ast.Constant)
               and k.value.value is True for k in expr.keywords)


def _parameters_of(src, call: ast.Call) -> set[str]:
    """Attributes the innermost class around ``call`` assigns an ``nn.Parameter`` to."""
    classes = [n for n in ast.walk(src.tree) if isinstance(n, ast.ClassDef)
               and n.lineno <= call.lineno <= (n.end_lineno or n.lineno)]
    if not classes:
        return set()
    cls = max(classes, key=lambda c: c.lineno)
    found = set()
    for node in ast.walk(cls):
        if isinstance(node, ast.Assign) and _trainable_call(node.value):
            found |= {t.attr for t in node.targets if isinstance(t, ast.Attribute)
                      and isinstance(t.value, ast.Name) and t.value.id == "self"}
    return found


__all__ = ["GS250", "GS251"]
