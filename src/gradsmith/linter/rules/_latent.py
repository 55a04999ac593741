"""GS228, GS229: the warnings beside GS105 and GS108/GS110 where the error's harm is not
shown (a parameter's name is the only sign it is not a tensor; backward can never run)."""

from __future__ import annotations

import ast
import re

from gradsmith.linter._facts import is_ctx_call
from gradsmith.linter._flow import walk_shallow
from gradsmith.linter._registry import Rule
from gradsmith.linter.rules._common import short

_H = "import torch\n\n\nclass Fn(torch.autograd.Function):\n    @staticmethod\n"
GS228 = Rule(
    "GS228", "save-maybe-non-tensor", "warning",
    "A forward input that may be a number is passed to ctx.save_for_backward(): its name "
    "reads as a number or flag (`dim`, `stride`, `groups`), its annotation allows both "
    "(`max_seqlen: torch.Tensor | int`), forward tests `isinstance(x, torch.Tensor)`, or "
    "forward's docstring documents it as a number (`min_range: A float.`)",
    "save_for_backward raises TypeError for a non-tensor. Nothing shows this one is a number "
    "on every call (no number as default, no use only numbers allow), so callers passing a "
    "tensor are fine and callers passing a number (which the annotation or the isinstance "
    "test invites) get the TypeError: a warning, not an error.",
    "if it is a number, keep it as a ctx attribute (`ctx.stride = stride`); if it is a "
    "tensor, annotate it (`stride: torch.Tensor`).",
    bad=_H + "    def forward(ctx, x, stride):\n        ctx.save_for_backward(x, stride)  # GS228\n"
    "        return x * 2\n\n    @staticmethod\n    def backward(ctx, g):\n"
    "        return g * 2, None\n",
    good=_H + "    def forward(ctx, x, stride):\n        ctx.stride = stride\n        return x * 2\n"
    "\n    @staticmethod\n    def backward(ctx, g):\n        return g * 2, None\n",
    brief="input that may be a number passed to save_for_backward",
)
GS229 = Rule(
    "GS229", "latent-gradient-count", "warning",
    "backward's gradient count (returned or received) is wrong, but every output of forward "
    "is an integer/bool tensor or marked non-differentiable, so backward never runs",
    "Integer and bool tensors never require grad and marked outputs carry no gradient, so "
    "autograd never calls backward and the wrong count cannot fail today; it will the day "
    "an output becomes a float tensor that carries a gradient.",
    "return one value per forward input and take one gradient parameter per output, "
    "or drop backward's body for `return (None,) * n_inputs`.",
    bad=_H + "    def forward(ctx, x, k):\n        return (x > k).int()\n\n    @staticmethod\n"
    "    def backward(ctx, g):\n        return None  # GS229\n",
    good=_H + "    def forward(ctx, x, k):\n        return (x > k).int()\n\n    @staticmethod\n"
    "    def backward(ctx, g):\n        return None, None\n",
    brief="wrong gradient count, latent: no output can carry a gradient",
)
GS246 = Rule(
    "GS246", "backward-arity-by-branch", "warning",
    "forward returns different numbers of outputs on different branches (an option such as "
    "`return_map=True` adds one) and backward's gradient parameters fit only some of them",
    "Autograd calls backward with one gradient per output of the call that ran; on the "
    "branch whose count backward cannot take it raises TypeError. Which branch runs depends "
    "on the callers' option, so this is a warning (GS110 when no branch fits).",
    "take the gradients as `backward(ctx, g, *rest)`, or one parameter per output with a "
    "default for the optional ones (`g_map=None`).",
    bad=_H + "    def forward(ctx, x, return_half=False):\n        out = torch.mul(x, 2)\n"
    "        if return_half:\n            return out, x / 2\n        return out\n\n"
    "    @staticmethod\n    def backward(ctx, g):  # GS246\n        return g * 2, None\n",
    good=_H + "    def forward(ctx, x, return_half=False):\n        out = torch.mul(x, 2)\n"
    "        if return_half:\n            return out, x / 2\n        return out\n\n"
    "    @staticmethod\n"
    "    def backward(ctx, g, g_half=None):\n"
    "        return g * 2 + (0 if g_half is None else g_half / 2), None\n",
    brief="backward fits only some of forward's output counts",
)


def maybe_number(forward: ast.AST, name: str) -> str | None:
    """Why input ``name`` may be a number although it may be a tensor too: an annotation
    that allows both (``torch.Tensor | int``), an ``isinstance(name, torch.Tensor)``
    test in forward (which handles the other case), or forward's docstring saying it is a
    number (callers read the docstring; the code may still work only with a tensor)."""
    for a in (*forward.args.posonlyargs, *forward.args.args, *forward.args.kwonlyargs):
        if a.arg == name and a.annotation is not None:
            text = ast.unparse(a.annotation)
            if re.search(r"\b(int|float|bool)\b", text) and "Tensor" in text:
                return f"annotated `{short(text, 28)}`"
    for node in ast.walk(forward):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" \
                and len(node.args) == 2 and isinstance(node.args[0], ast.Name) \
                and node.args[0].id == name and "Tensor" in ast.unparse(node.args[1]):
            return "forward checks isinstance(..., Tensor)"
    documented = _documented_number(forward, name)
    return f"documented as `{short(documented, 28)}`" if documented else None


#: A docstring's entry for a parameter: ``name: A float.``, ``name (int): ...``,
#: ``name : float`` (numpy style); group 1 is the type in parentheses, 2 the text after ':'.
_DOC_ENTRY = r"^\s*{}\s*(?:\(([^)]*)\))?\s*:\s*(.*)$"
_DOC_NUMBER = re.compile(r"^(?:an?\s+)?(?:python\s+)?(float|int|integer|bool|boolean|number|"
                         r"scalar)\b", re.I)


def _documented_number(forward: ast.AST, name: str) -> str | None:
    """The line of forward's docstring that documents ``name`` as a number (``min_range: A
    float.``, ``step (int): ...``), when it does and does not mention a tensor."""
    doc = ast.get_docstring(forward) or ""
    entry = re.compile(_DOC_ENTRY.format(re.escape(name)), re.M)
    for match in entry.finditer(doc):
        kind, text = (match.group(1) or "").strip(), match.group(2).strip()
        if "tensor" in match.group(0).lower():
            continue
        if _DOC_NUMBER.match(kind) or not kind and _DOC_NUMBER.match(text):
            return match.group(0).strip()
    return None


def non_differentiable(method, ctx: str | None) -> set[str]:
    """Names ``method`` passes to ``ctx.mark_non_differentiable(...)``."""
    return {arg.id for node in walk_shallow(method.node) if is_ctx_call(node, ctx,
                                                                     "mark_non_differentiable")
            for arg in node.args if isinstance(arg, ast.Name)}


#: ``torch.cat([a, b])``: integer when every part is (type promotion keeps it integer).
_JOINS = frozenset("cat concat concatenate stack hstack vstack".split())
_INT_CASTS = frozenset("int long short bool byte char".split())
#: ``x.new()``, ``x.new_zeros(n)``: a tensor of ``x``'s dtype (unless a dtype is given).
_NEW = frozenset("new new_empty new_zeros new_ones new_full".split())
_INT_CTOR = re.compile(r"^(Long|Int|Short|Char|Byte|Bool)Tensor$")
_INT_DTYPE = re.compile(r"\b(u?int(8|16|32|64)|long|int|short|bool)\b")
#: Methods whose result has the dtype of the tensor they are called on.
_SAME_DTYPE = frozenset(
    """contiguous view reshape clone detach squeeze unsqueeze flatten t transpose permute
    expand cuda cpu""".split()
)


def no_gradient_outputs(method, ctx: str | None, int_inputs: frozenset = frozenset()) -> bool:
    """Whether every output forward returns is an integer/bool tensor or marked
    non-differentiable, so no output can carry a gradient and backward never runs.

    Example:
        >>> import ast
        >>> from gradsmith.linter._discovery import Method
        >>> node = ast.parse("def forward(ctx, x):\\n    return (x > 0).int()").body[0]
        >>> no_gradient_outputs(Method("forward", node, None, set()), "ctx")
        True
    """
    outputs, bound, unknown, known = forward_outputs(method, ctx, int_inputs)
    return bool(outputs) and all(
        integer(e, bound, unknown, known) for e in outputs)


def forward_outputs(method, ctx: str | None, int_inputs: frozenset = frozenset()):
    """(outputs forward returns, the values each local name is bound to, names bound in
    ways not followed, names known to be integer or marked non-differentiable)."""
    marked = non_differentiable(method, ctx)
    bound: dict[str, list[ast.expr]] = {}
    unknown: set[str] = set()
    outputs: list[ast.expr] = []
    for node in walk_shallow(method.node):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    bound.setdefault(target.id, []).append(node.value)
                else:
                    unknown.update(n.id for n in ast.walk(target)
                                   if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.With, ast.NamedExpr)):
            unknown.update(n.id for n in ast.walk(getattr(node, "target", node))
                           if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
        elif isinstance(node, ast.Return) and node.value is not None:
            value = node.value
            outputs.extend(value.elts if isinstance(value, ast.Tuple) else [value])
    annotated = {a.arg for a in (*method.node.args.posonlyargs, *method.node.args.args,
                                 *method.node.args.kwonlyargs) if _int_annotation(a.annotation)}
    known = marked | {n for n in int_inputs | annotated if n not in bound and n not in unknown}
    return outputs, bound, unknown, known


def integer(expr: ast.expr, bound, unknown, known) -> bool:
    """``expr`` (in the method :func:`forward_outputs` read) is an integer/bool tensor or
    a name marked non-differentiable."""
    return _integer(expr, bound, unknown, known, 0)


def _int_annotation(annotation: ast.expr | None) -> bool:
    """``idx: torch.IntTensor``: the author declares an integer tensor type."""
    if annotation is None:
        return False
    name = annotation.attr if isinstance(annotation, ast.Attribute) else getattr(
        annotation, "id", "")
    return bool(_INT_CTOR.match(name))


def _rebinds(value: ast.expr, name: str) -> bool:
    """``value`` reads ``name`` itself (``idx[:n]``, ``idx.int()``)."""
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(value))


def _integer(expr: ast.expr, bound, unknown, marked, depth: int) -> bool:
    if depth > 8:
        return False
    if isinstance(expr, ast.Compare):
        return True
    if isinstance(expr, ast.Name):
        if expr.id in marked:
            return True
        values = bound.get(expr.id)
        # `idx = idx[:n]` rebinds the name from itself: its other bindings decide
        own = [v for v in values or () if _rebinds(v, expr.id)]
        rest = [v for v in values or () if not _rebinds(v, expr.id)]
        return bool(rest) and expr.id not in unknown and all(
            _integer(v, bound, unknown, marked, depth + 1) for v in rest) and all(
            _integer(v, {**bound, expr.id: rest}, unknown, marked, depth + 1) for v in own)
    if isinstance(expr, ast.Subscript):  # `idx[:n_active]`: a slice keeps the dtype
        return _integer(expr.value, bound, unknown, marked, depth + 1)
    if not isinstance(expr, ast.Call):
        return False
    func = expr.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if _INT_CTOR.match(name) or any(
            k.arg == "dtype" and _INT_DTYPE.search(ast.unparse(k.value)) for k in expr.keywords):
        return True
    if not isinstance(func, ast.Attribute):
        return False
    if name in _JOINS and expr.args and isinstance(expr.args[0], (ast.List, ast.Tuple)) \
            and expr.args[0].elts:  # the joined dtype is the promoted dtype of the parts
        return all(_integer(e, bound, unknown, marked, depth + 1) for e in expr.args[0].elts)
    if name in _INT_CASTS and not expr.args:
        return True
    if name in ("to", "type") and expr.args and _INT_DTYPE.search(ast.unparse(expr.args[0])):
        return True
    if name in _SAME_DTYPE or name in _NEW or (name.endswith("_") and not name.startswith("_")):
        return _integer(func.value, bound, unknown, marked, depth + 1)
    return False


def int_inputs(facts) -> frozenset:
    """Forward inputs every linted call passes an integer tensor for (``labels.int()``, or
    a local bound only to such): what ``x.new()`` in forward then also is."""
    from gradsmith.linter._reuse import call_arguments

    inputs = facts.inputs
    if inputs is None:
        return frozenset()
    found = set()
    for position, name in enumerate(inputs[0]):
        passed = call_arguments(facts.fc.node.name, position, facts.sym_of)
        if passed and all(_passed_integer(arg, func) for arg, func in passed):
            found.add(name)
    return frozenset(found)


def _passed_integer(arg: ast.expr, func) -> bool:
    """``arg`` (in the calling function ``func``) is an integer tensor."""
    bound: dict[str, list[ast.expr]] = {}
    for node in ast.walk(func) if func is not None else ():
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                node.targets[0], ast.Name):
            bound.setdefault(node.targets[0].id, []).append(node.value)
    return _integer(arg, bound, set(), set(), 0)
