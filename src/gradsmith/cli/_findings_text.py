"""Findings as ``gradsmith check`` prints them by default: short, root cause first, repeats
merged (private; ``-v`` prints each report in full instead).

- Errors come first, in the order the checks ran (a structure error before the gradient
  mismatch it causes), then warnings; info findings only with ``-v``.
- One code reported several times for one Function (for each input, or for each input set)
  is one finding: ``ERROR gradient-mismatch [x, w] (2 findings): <the first one>``.
- A warning shared by passing Functions is printed once, naming them.
- A multi-line fix (a rewritten ``forward``) keeps its first line; ``-v`` shows the code.
"""

from __future__ import annotations

from dataclasses import dataclass, field

_SHOWN = ("error", "warning")


@dataclass
class Group:
    """Findings of one severity and code (of one Function, or shared by several)."""

    severity: str
    code: str
    first: dict
    inputs: list[str] = field(default_factory=list)
    count: int = 0
    owners: list[str] = field(default_factory=list)


def group(findings: list[dict], owner: str = "") -> list[Group]:
    """Errors then warnings, one :class:`Group` per (severity, code), in report order."""
    groups: dict[tuple[str, str], Group] = {}
    for f in findings:
        if f["severity"] not in _SHOWN:
            continue
        g = groups.setdefault((f["severity"], f["code"]), Group(f["severity"], f["code"], f))
        g.count += 1
        if f.get("input") and f["input"] not in g.inputs:
            g.inputs.append(f["input"])
        if owner and owner not in g.owners:
            g.owners.append(owner)
    return sorted(groups.values(), key=lambda g: _SHOWN.index(g.severity))


def function_text(findings: list[dict]) -> str:
    """The findings of one Function, merged (see the module docstring)."""
    return "\n".join(_group_text(g) for g in group(findings))


def shared_warnings(rows: list[tuple[str, list[dict]]]) -> str:
    """Warnings of passing Functions, one entry per code, naming the Functions it concerns.

    Args:
        rows: ``(name, findings)`` of each passing Function.
    """
    merged: dict[str, Group] = {}
    for name, findings in rows:
        for g in group(findings, owner=name):
            if g.severity != "warning":
                continue
            if g.code not in merged:
                merged[g.code] = g
                continue
            seen = merged[g.code]
            seen.count += g.count
            seen.owners += [o for o in g.owners if o not in seen.owners]
            seen.inputs += [i for i in g.inputs if i not in seen.inputs]
    return "\n".join(_group_text(g, shared=True) for g in merged.values())


def hidden_infos(findings: list[dict]) -> int:
    """How many info findings the default output leaves out."""
    return sum(f["severity"] == "info" for f in findings)


def _group_text(g: Group, shared: bool = False) -> str:
    where = f" [{', '.join(g.inputs)}]" if g.inputs and not shared else ""
    many = f" ({g.count} findings; -v lists each)" if g.count > 1 and not shared else ""
    if shared:
        # a message names its Function's own variables: said for the first one named
        who = g.owners[0] + (f" and {len(g.owners) - 1} more: {', '.join(g.owners[1:])}"
                             if len(g.owners) > 1 else "")
        head = f"  {g.severity.upper()} {g.code} ({who}): {g.first['message']}"
    else:
        head = f"  {g.severity.upper()} {g.code}{where}{many}: {g.first['message']}"
    hint = g.first.get("hint") or ""
    if not hint:
        return head
    first, _, rest = hint.partition("\n")
    if rest.strip():
        first = first.rstrip(":") + " (gradsmith check -v shows the code)"
    return f"{head}\n      fix: {first}"
