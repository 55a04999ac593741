"""Shapes a Function's own code states for its inputs, read without running it (private).

Kernel libraries rarely leave shapes to guesswork: they say them, in words synthesis can read.

- a comment on a forward parameter: ``x: torch.Tensor,  # [..., HC, C]`` or ``# scalar``;
- a docstring line: ``q size: (bsz, n_q_head, seq_len, head_dim)``;
- an error message, in forward's module, about a parameter or about the helper parameter it is
  passed to: ``assert x.dim() >= 3, "x must be [..., HC, C]"``,
  ``raise ValueError("expected input[M,H], weight[V,H], and target[M]")`` in
  ``_validate(_input, weight, target)`` called as ``_validate(hidden, w, ids)``;
- host code: ``N, HC, C = x_flat.shape`` names the dimensions of a tensor, and
  ``h_res.view(-1, HC, HC)`` then states ``h_res`` as ``[..., HC, HC]``;
- equalities between dimensions: ``assert HC * HC + 2 * HC == M``.

A dimension is a name (tied by name across statements), an integer, ``...`` (leading
dimensions), or a product or sum of those. :mod:`~gradsmith.discovery.from_code` turns the
statements into sizes and probes them; a wrong reading costs one failed probe.
"""

from __future__ import annotations

import ast
import inspect
import re
from dataclasses import dataclass, field
from typing import Any

from gradsmith.discovery.source import parse

_DIMS = r"[\w.*+\s]*(?:,[\w.*+\s]*)*"
_DIM = re.compile(r"^(\.\.\.|[A-Za-z_]\w*|\d+|[\w\s*+]+)$")
_COMMENT = re.compile(r"#\s*(?:\[(" + _DIMS + r")\]|(scalar)\b)")
_DOC = re.compile(r"^\s*`*(\w+)`*\s*(?:size|shape)?\s*:\s*[\[(](" + _DIMS + r")[\])]")
# ``x: Input tensor [batch_size, in_features]``: words, then a bracketed list of two or more dims
_DESCRIBED = re.compile(r"^\s*`*(\w+)`*\s*(?:\([\w\s.,]*\))?\s*:\s*[A-Za-z][A-Za-z\s]{0,40}?"
                        r"(?:\[(" + _DIMS + r")\]|\((" + _DIMS + r",\s*" + _DIMS + r")\))\s*\.?$")
_MESSAGE = re.compile(r"\b(\w+)\s*(?:must be|should be|of shape|shape)?\s*\[(" + _DIMS + r")\]")
_SECTION = re.compile(r"sections?$|_sizes$|_splits?$")
_OPTIONS = re.compile(r"\b(?:options? (?:are|is)|one of|either|choices? (?:are|is)|can be|"
                      r"supported (?:values|modes) are|choose (?:between|from|one of))\b",
                      re.IGNORECASE)


@dataclass
class Statements:
    """What the code says: dims per forward parameter, equalities, section-list parameters."""

    shapes: dict[str, list[str]] = field(default_factory=dict)
    where: dict[str, str] = field(default_factory=dict)     # parameter -> how it was read
    equations: dict[str, str] = field(default_factory=dict)  # symbol -> expression
    sections: dict[str, int] = field(default_factory=dict)   # parameter -> number of parts
    index_like: set[str] = field(default_factory=set)        # stated through a target/ids name


def read_statements(owner: type, names: list[str]) -> Statements:
    """The shapes ``owner`` (a Function class) states for its forward's parameters ``names``.

    Example:
        >>> import torch
        >>> class F(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x, h):
        ...         N, HC, C = x.shape
        ...         return x * h.view(-1, HC, 1)
        >>> read_statements(F, ["x", "h"]).shapes
        {'x': ['N', 'HC', 'C'], 'h': ['...', 'HC', '1']}
    """
    found = Statements()
    forward = getattr(owner, "forward", None)
    module = inspect.getmodule(owner)
    wanted = set(names)
    _from_comments(forward, wanted, found)
    for doc in (inspect.getdoc(forward) or "", inspect.getdoc(owner) or ""):
        for line in doc.splitlines():
            m = _DOC.match(line)
            if m and m.group(1) in wanted and _dims(m.group(2)) is not None:
                _state(found, m.group(1), _dims(m.group(2)), "its docstring")
            elif (m := _DESCRIBED.match(line)) and m.group(1) in wanted and \
                    _dims(dims := m.group(2) or m.group(3)) is not None and \
                    "0" not in _dims(dims):  # ``[0, 1]``: an interval, not a shape
                _state(found, m.group(1), _dims(dims), "its docstring")
    aliases = _helper_aliases(forward, wanted)
    tree = parse(module)
    if tree is not None:
        _from_messages(tree, aliases, found)
        _equations(tree, found)
        _sections(tree, wanted, found)
    _from_host_code([parse(m) for m in (forward, getattr(owner, "backward", None))],
                    wanted, found)
    named = {d for dims in found.shapes.values() for d in dims}
    found.equations = {k: v for k, v in found.equations.items()  # about these dims only
                       if k in named and set(re.findall(r"[A-Za-z_]\w*", v)) <= named}
    return found


def documented_options(fn: Any, names: list[str]) -> dict[str, list[str]]:
    """Values ``fn``'s docstring lists for its parameters (``Options are 'a', 'b'``).

    Example:
        >>> def forward(ctx, x, mode):
        ...     \"\"\"Args:
        ...         mode: how to round. One of 'floor' or 'nearest'.
        ...     \"\"\"
        >>> documented_options(forward, ["x", "mode"])
        {'mode': ['floor', 'nearest']}
    """
    return _documented_options(inspect.getdoc(fn) or "", set(names))


def _documented_options(doc: str, wanted: set[str]) -> dict[str, list[str]]:
    """``act_func: Name of the activation. Options are 'sigmoid', 'tanh', ...`` in a
    Google-style ``Args:`` entry: the quoted values, in order."""
    found: dict[str, list[str]] = {}
    lines = doc.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^(\s*)(\w+)\s*(?:\([^)]*\))?:\s*(.*)$", line)
        if not m or m.group(2) not in wanted:
            continue
        body = [m.group(3)]
        for more in lines[i + 1:]:  # the entry's continuation lines, indented deeper
            if more.strip() and len(more) - len(more.lstrip()) <= len(m.group(1)):
                break
            body.append(more.strip())
        text = " ".join(body)
        # "*numpy*": a quoted value may carry Markdown emphasis
        values = re.findall(r"['\"`]\**([A-Za-z_][\w.-]*?)\**['\"`]", text)
        if _OPTIONS.search(text) and values:
            found.setdefault(m.group(2), list(dict.fromkeys(values)))
    return found


def _state(found: Statements, name: str, dims: list[str], where: str) -> None:
    if name not in found.shapes:  # the first, most explicit statement wins
        found.shapes[name] = dims
        found.where[name] = where


def _dims(text: str) -> list[str] | None:
    text = text.strip()
    if not text:
        return []
    parts = [p.strip() for p in text.split(",")]
    if parts and parts[-1] == "":  # (n,)
        parts = parts[:-1]
    if not parts or not all(_DIM.match(p) for p in parts):
        return None
    return [" ".join(p.split()) for p in parts]


def _from_comments(forward: Any, wanted: set[str], found: Statements) -> None:
    """``x: torch.Tensor,  # [..., HC, C]`` on forward's own parameter lines."""
    try:
        lines = inspect.getsource(forward).splitlines()
    except (OSError, TypeError):
        return
    for line in lines:
        code, _, comment = line.partition("#")
        m = re.match(r"\s*(?:def \w+\(\s*ctx\s*,\s*)?(\w+)\s*[:,=)]", code)
        if not m or m.group(1) not in wanted or not comment:
            continue
        c = _COMMENT.match("#" + comment)
        if c:
            dims = [] if c.group(2) else _dims(c.group(1))
            if dims is not None:
                _state(found, m.group(1), dims, "a comment on the parameter")


def _helper_aliases(forward: Any, wanted: set[str]) -> dict[str, str]:
    """Name in a message -> forward parameter: the parameter itself, and the parameter of a
    module-level helper it is passed to (``_validate(_input, ...)`` called with ``hidden``)."""
    aliases = {n: n for n in wanted} | {n.lstrip("_"): n for n in wanted}
    tree = parse(forward)
    scope = getattr(forward, "__globals__", {})
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)) if tree else ():
        helper = scope.get(call.func.id) if isinstance(call.func, ast.Name) else None
        if not inspect.isfunction(helper):
            continue
        try:
            params = list(inspect.signature(helper).parameters)
        except (TypeError, ValueError):
            continue
        for theirs, arg in zip(params, call.args):
            if isinstance(arg, ast.Name) and arg.id in wanted:
                aliases.setdefault(theirs.lstrip("_"), arg.id)
                aliases.setdefault(theirs, arg.id)
    return aliases


def _strings(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value
        elif isinstance(node, ast.JoinedStr):
            yield "".join(v.value for v in node.values
                          if isinstance(v, ast.Constant) and isinstance(v.value, str))


def _from_messages(tree: ast.AST, aliases: dict[str, str], found: Statements) -> None:
    index_words = ("target", "label", "ids", "index", "indices")
    for text in _strings(tree):
        if len(text) > 300 or "[" not in text:
            continue
        for m in _MESSAGE.finditer(text):
            ours = aliases.get(m.group(1)) or aliases.get(m.group(1).lstrip("_"))
            dims = _dims(m.group(2))
            if ours and dims is not None:
                _state(found, ours, dims, f"the message {text!r}")
                if any(w in m.group(1).lower() for w in index_words):
                    found.index_like.add(ours)


def _expr(node: ast.AST) -> str | None:
    """The text of an arithmetic expression of names and integers, else None."""
    if isinstance(node, ast.Name) or (isinstance(node, ast.Constant)
                                      and type(node.value) is int):
        return ast.unparse(node)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
        left, right = _expr(node.left), _expr(node.right)
        return None if left is None or right is None else ast.unparse(node)
    return None


def _equations(tree: ast.AST, found: Statements) -> None:
    """``assert HC * HC + 2 * HC == M``: M is defined by HC (single names on one side)."""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Compare) and len(node.ops) == 1
                and isinstance(node.ops[0], ast.Eq)):
            continue
        left, right = node.left, node.comparators[0]
        for name, other in ((left, right), (right, left)):
            text = _expr(other)
            if isinstance(name, ast.Name) and text and not isinstance(other, ast.Name):
                found.equations.setdefault(name.id, text)


def _sections(tree: ast.AST, wanted: set[str], found: Statements) -> None:
    """``mrope_section[0]``, ``mrope_section[1]``: a list of ints with one part more than the
    highest constant index the code reads (the last part is what is left)."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
                and node.value.id in wanted and _SECTION.search(node.value.id)
                and isinstance(node.slice, ast.Constant) and type(node.slice.value) is int):
            parts = node.slice.value + 2
            found.sections[node.value.id] = max(found.sections.get(node.value.id, 2), parts)


def _walk(trees: list[ast.AST | None]):
    for tree in trees:
        if tree is not None:
            yield from ast.walk(tree)


def _from_host_code(trees: list[ast.AST | None], wanted: set[str], found: Statements) -> None:
    """``N, HC, C = x.shape`` names x's dims; ``h.view(-1, HC, HC)`` then states h (forward
    and backward together: a tensor saved in one keeps its local name in the other)."""
    local: dict[str, list[str]] = {}
    for node in _walk(trees):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Tuple)
                and isinstance(node.value, ast.Attribute) and node.value.attr == "shape"
                and isinstance(node.value.value, ast.Name)
                and all(isinstance(e, ast.Name) for e in node.targets[0].elts)):
            dims = [e.id for e in node.targets[0].elts]
            local.setdefault(node.value.value.id, dims)
            if node.value.value.id in wanted:
                _state(found, node.value.value.id, dims, "its host code unpacking .shape")
    for node in _walk(trees):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("view", "reshape") and node.args):
            continue
        base = _unwrap(node.func.value)
        dims = [_view_dim(a, local) for a in node.args]
        if base in wanted and all(d is not None for d in dims) and dims.count("...") <= 1:
            _state(found, base, dims, "its host code's view/reshape")


def _unwrap(node: ast.AST) -> str | None:
    """``h``, also through ``h.contiguous()``, ``h.float()``: the name viewed."""
    while (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
           and node.func.attr in ("contiguous", "float", "detach", "clone") and not node.args):
        node = node.func.value
    return node.id if isinstance(node, ast.Name) else None


def _view_dim(node: ast.AST, local: dict[str, list[str]]) -> str | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) \
            and isinstance(node.operand, ast.Constant) and node.operand.value == 1:
        return "..."
    if isinstance(node, ast.Constant) and type(node.value) is int and node.value > 0:
        return str(node.value)
    if isinstance(node, ast.Name) and any(node.id in dims for dims in local.values()):
        return node.id
    if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute)
            and node.value.attr == "shape" and isinstance(node.value.value, ast.Name)
            and isinstance(node.slice, ast.Constant) and type(node.slice.value) is int):
        dims = local.get(node.value.value.id)
        if dims and -len(dims) <= node.slice.value < len(dims):
            return dims[node.slice.value]
    return None
