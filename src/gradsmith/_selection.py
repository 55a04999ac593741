"""``--select`` / ``--ignore`` by code or code prefix, shared by ``gradsmith lint`` and
``gradsmith check`` so both read the same way: the longer matching prefix wins."""

from __future__ import annotations

from collections.abc import Iterable


def selected(code: str, select: Iterable[str] | None, ignore: Iterable[str] | None,
             everything: str = "") -> bool:
    """Whether ``code`` is reported under ``select`` / ``ignore``.

    Args:
        code: a finding's code.
        select: codes or prefixes to report; none means ``everything``.
        ignore: codes or prefixes to drop.
        everything: the prefix every code of the tool starts with (``"GS"`` for lint).

    Returns:
        True when some ``select`` prefix matches and no longer ``ignore`` prefix does.

    Example:
        >>> selected("GS203", ["GS2"], ["GS20"]), selected("GS203", ["GS203"], ["GS2"])
        (False, True)
        >>> selected("compile-mismatch", None, ["compile-"])
        False
    """
    best_sel = max((len(p) for p in (select or [everything]) if code.startswith(p)), default=-1)
    best_ign = max((len(p) for p in (ignore or []) if code.startswith(p)), default=-1)
    return best_sel >= 0 and best_sel >= best_ign
