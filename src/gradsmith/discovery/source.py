"""The parsed source of a function, class or module, once per object.

Synthesis reads the same ``forward``/``backward`` for many facts (hints, contract, flags, uses,
stated shapes); each read used to fetch and parse the source again. The trees are only read,
never changed, so one parse serves them all.
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
from typing import Any


def parse(obj: Any) -> ast.AST | None:
    """``obj``'s source as an AST (dedented), or ``None`` when it has none that parses."""
    try:
        return _parse(obj)
    except TypeError:  # unhashable: parse it uncached
        return _parse.__wrapped__(obj)


@functools.lru_cache(maxsize=512)
def _parse(obj: Any) -> ast.AST | None:
    try:
        source = inspect.getsource(obj)
    except (OSError, TypeError):
        return None
    for text in (source, _uncommented(source)):
        try:
            return ast.parse(textwrap.dedent(text))
        except (SyntaxError, IndentationError):
            continue
    return None


def _uncommented(source: str) -> str:
    """``source`` with its comment-only lines blanked (line numbers kept): a method with a
    line commented out at column 0 (``#         else:``) has no common indent to remove, so
    it did not parse and every reader of the code saw nothing."""
    return "\n".join("" if line.lstrip().startswith("#") else line
                     for line in source.split("\n"))


def method_trees(owner: Any) -> dict[str, ast.AST]:
    """The parsed ``forward``, ``setup_context`` and ``backward`` a Function class defines
    (those with a readable source)."""
    trees = {}
    for method in ("forward", "setup_context", "backward"):
        fn = vars(owner).get(method) if isinstance(owner, type) else None
        tree = parse(getattr(fn, "__func__", fn)) if fn is not None else None
        if tree is not None:
            trees[method] = tree
    return trees


def module_function(call: ast.Call, fn: Any) -> tuple[Any, list[str]] | None:
    """The module-level function a plain call in ``fn`` runs (``find_gaps(x, magic)``, looked up
    in ``fn``'s globals) and its parameter names; None for anything else."""
    if not isinstance(call.func, ast.Name):
        return None
    try:  # a decorated forward (@custom_fwd) reads the globals of the module it was written in
        fn = inspect.unwrap(fn)
    except ValueError:
        pass
    helper = getattr(fn, "__globals__", {}).get(call.func.id)
    # @torch.jit.script: the Python function it compiled (its source says the same)
    helper = getattr(helper, "_torchdynamo_inline", helper)
    if not inspect.isfunction(helper):
        return None
    try:
        return helper, list(inspect.signature(helper).parameters)
    except (TypeError, ValueError):
        return None


def stored_on_ctx(tree: ast.AST | None, names: list[str]) -> dict[str, str]:
    """ctx attribute -> forward parameter, for what ``tree`` (forward or setup_context) keeps
    on ctx as it is: ``ctx.flag = flag``, and in a ``setup_context(ctx, inputs, output)``
    ``ctx.flag = inputs[0]`` or ``flag, x = inputs; ctx.flag = flag`` (positions of forward's
    parameters ``names``), also unpacked (``ctx.fw, ctx.bw, _ = inputs``).

    Example:
        >>> tree = ast.parse("def setup_context(ctx, inputs, output):\\n"
        ...                  "    ctx.phase = inputs[0]\\n    a, fn = inputs[:2]\\n"
        ...                  "    ctx.fn = fn\\n    ctx.p, ctx.q, _ = inputs")
        >>> stored_on_ctx(tree, ["phase", "fn", "x"])
        {'phase': 'phase', 'fn': 'fn', 'p': 'phase', 'q': 'fn'}
    """
    if tree is None:
        return {}
    local = {n: n for n in names}
    packed = _inputs_parameter(tree)
    for node in ast.walk(tree):  # a, b = inputs (or inputs[:2])
        if (packed and isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Tuple) and _is_name(_unsliced(node.value),
                                                                         packed)):
            for i, element in enumerate(node.targets[0].elts):
                if isinstance(element, ast.Name) and i < len(names):
                    local[element.id] = names[i]
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign):
            continue
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple):
            found.update(_unpacked_onto_ctx(node, local, packed, names))
            continue
        value = node.value
        name = local.get(value.id) if isinstance(value, ast.Name) else None
        if (name is None and packed and isinstance(value, ast.Subscript)
                and _is_name(value.value, packed) and isinstance(value.slice, ast.Constant)
                and type(value.slice.value) is int and 0 <= value.slice.value < len(names)):
            name = names[value.slice.value]
        if name is None:
            continue
        for target in node.targets:
            if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                    and target.value.id == "ctx"):
                found[target.attr] = name
    return found


def _unpacked_onto_ctx(node: ast.Assign, local: dict[str, str], packed: str | None,
                       names: list[str]) -> dict[str, str]:
    """``ctx.fw, ctx.bw, _ = inputs`` or ``ctx.fw, ctx.bw = fw, bw``: ctx attribute ->
    parameter for each element stored on ctx."""
    elements = node.targets[0].elts
    if packed and _is_name(_unsliced(node.value), packed):
        values = names
    elif isinstance(node.value, ast.Tuple) and len(node.value.elts) == len(elements):
        values = [local.get(v.id) if isinstance(v, ast.Name) else None for v in node.value.elts]
    else:
        return {}
    return {e.attr: values[i] for i, e in enumerate(elements)
            if i < len(values) and values[i] is not None and isinstance(e, ast.Attribute)
            and isinstance(e.value, ast.Name) and e.value.id == "ctx"}


def read_parameter(node: ast.AST, local: dict[str, str], stored: dict[str, str]) -> str | None:
    """The forward parameter ``node`` reads: a name bound to one (``local``: name -> parameter)
    or ``ctx.attr`` where forward stored one (``stored``, from :func:`stored_on_ctx`).

    Example:
        >>> read_parameter(ast.parse("ctx.k", mode="eval").body, {"x": "x"}, {"k": "order"})
        'order'
    """
    if isinstance(node, ast.Name):
        return local.get(node.id)
    if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.value.id == "ctx"):
        return stored.get(node.attr)
    return None


def _inputs_parameter(tree: ast.AST) -> str | None:
    """The name of setup_context's ``inputs`` parameter, if ``tree`` defines one."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "setup_context":
            args = [a.arg for a in node.args.args]
            return args[1] if len(args) >= 2 else None
    return None


def _unsliced(node: ast.AST) -> ast.AST:
    return node.value if isinstance(node, ast.Subscript) and isinstance(
        node.slice, ast.Slice) else node


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def forward_parameters(owner: type) -> list[str]:
    """The Function class ``owner``'s forward parameters after ``ctx`` (all of them in the
    setup_context style, where forward takes no ctx); [] when there is no signature."""
    try:
        params = list(inspect.signature(getattr(owner, "forward", None)).parameters)
    except (TypeError, ValueError):
        return []
    if "setup_context" not in vars(owner) and params:
        params = params[1:]  # ctx
    return params


def parse_code(code: Any) -> tuple[ast.AST, int] | None:
    """The source of a running frame's code object as an AST (dedented) and its first line
    number, so that ``lineno - start + 1`` is a traceback line's line in the tree; None when
    it has no source that parses."""
    try:
        lines, start = inspect.getsourcelines(code)
        return ast.parse(textwrap.dedent("".join(lines))), start
    except (OSError, TypeError, SyntaxError, IndexError):
        return None


def function_def(code: Any) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, int] | None:
    """The ``def`` a code object was compiled from, and its first line in the file; None where
    its source cannot be read or parsed."""
    try:
        lines, start = inspect.getsourcelines(code)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return None
    fn = next((n for n in ast.walk(tree)
               if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    return None if fn is None else (fn, start)


def call_name(node: ast.Call) -> str:
    """The name a call's function goes by: ``f`` of ``f(x)`` and of ``torch.f(x)`` or
    ``x.f()``; ``""`` for a call of anything else (``fs[0](x)``, ``make()(x)``)."""
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def failing_calls(exc: BaseException) -> tuple[Any, list[ast.Call]] | None:
    """The innermost Python frame of ``exc``'s traceback and the calls written on its failing
    line (a call spanning lines counts on each), or None when that frame has no source: what
    a repair reads to find which argument the failing call was passed."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None or (parsed := parse_code(tb.tb_frame.f_code)) is None:
        return None
    tree, start = parsed
    line = tb.tb_lineno - start + 1
    return tb.tb_frame, [n for n in ast.walk(tree) if isinstance(n, ast.Call)
                         and n.lineno <= line <= (n.end_lineno or n.lineno)]


def dotted(func: ast.expr) -> tuple[ast.expr, list[str]]:
    """``a.b.c`` as its base expression (``a``) and the attribute path (``["b", "c"]``)."""
    path: list[str] = []
    while isinstance(func, ast.Attribute):
        path.insert(0, func.attr)
        func = func.value
    return func, path


def through_namespaces(value: Any, path: list[str]) -> Any:
    """``value.b.c`` for ``path`` ``["b", "c"]``, following modules and classes only (never an
    instance's attribute, which would run a property); None where the path leaves them."""
    import types

    for attr in path:
        if not isinstance(value, (types.ModuleType, type)):
            return None
        value = getattr(value, attr, None)
    return value
