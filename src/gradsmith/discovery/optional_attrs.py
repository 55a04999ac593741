"""Attributes the code reads only behind a ``hasattr`` test (private).

``x.tensor() if hasattr(x, "tensor") else x`` accepts a plain tensor: the attribute is
optional, no evidence that ``x`` is an object of some other class. Read as a config object's,
it made ``x`` a namespace whose ``tensor`` took an argument, and every layout failed (a skip).
"""

from __future__ import annotations

import ast


def hasattr_tested(tree: ast.AST, names: dict[str, str]) -> set[tuple[str, str]]:
    """``(parameter, attribute)`` for each ``hasattr(name, "attribute")`` in ``tree``
    (``names``: local name -> the parameter it holds).

    Example:
        >>> tree = ast.parse("y = x.tensor() if hasattr(x, 'tensor') else x")
        >>> hasattr_tested(tree, {"x": "x"})
        {('x', 'tensor')}
    """
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id == "hasattr" and len(node.args) == 2:
            obj, attr = node.args
            if isinstance(obj, ast.Name) and obj.id in names and isinstance(
                    attr, ast.Constant) and isinstance(attr.value, str):
                found.add((names[obj.id], attr.value))
    return found


def drop_optional(uses: dict, tested: set[tuple[str, str]], foreign) -> None:
    """Forget the hasattr-tested attributes of each use (``foreign``: whether an attribute
    is not a tensor's), so that they alone never make an argument an object."""
    for name, attr in tested:
        use = uses.get(name)
        if use is not None and use.attrs.pop(attr, None) is not None:
            use.foreign = any(foreign(a) for a in use.attrs)
