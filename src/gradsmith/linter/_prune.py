"""One root cause, one finding: drop the echoes of a finding, and findings that cannot matter.

- A method that takes ``self`` before ``ctx`` (GS117) or a ``forward(ctx, ...)`` beside a
  ``setup_context`` (GS114) shifts every parameter: the counts that depend on them (GS108,
  GS110, GS116, GS118, GS119, GS209) are wrong until the cause is fixed, so only the cause
  is reported.
- A Function with no backward at all raises as soon as a gradient reaches it, so its
  in-place edits of inputs (the cache-update idiom: write ``kv_cache`` and return it) cannot
  give a wrong gradient: GS101 (and GS230) is not reported for it.
- A backward that runs an opaque kernel (GS215) and returns a gradient computed in forward
  (GS222) has one cause and one fix (`@once_differentiable`): only GS215 is reported.
- When every output of forward is marked non-differentiable, backward never runs: findings
  about backward, about what is kept for it and about gradient counts cannot matter.
"""

from __future__ import annotations

import ast

from gradsmith.linter._facts import Facts, is_ctx_call
from gradsmith.linter._finding import LintFinding
from gradsmith.linter._flow import walk_shallow

ROOT_CAUSES = frozenset({"GS117", "GS114"})
ECHOES = frozenset({"GS108", "GS110", "GS116", "GS118", "GS119", "GS209"})
#: What only matters when a gradient flows back through the Function.
BACKWARD_ONLY = frozenset(
    """GS102 GS103 GS104 GS106 GS108 GS109 GS110 GS116 GS119 GS120 GS203 GS204 GS205 GS207
    GS209 GS213 GS221 GS223 GS301 GS302 GS303 GS304""".split()
)


def prune(facts: Facts, findings: list[LintFinding]) -> list[LintFinding]:
    """The findings of one Function, without echoes and findings that cannot matter."""
    codes = {f.code for f in findings}
    if codes & ROOT_CAUSES:
        findings = [f for f in findings if f.code not in ECHOES]
    if {"GS215", "GS222"} <= codes:
        findings = [f for f in findings if f.code != "GS222"]
    if codes & {"GS101", "GS230"} and facts.method("backward") is None and \
            not facts.fc.unknown_base:
        findings = [f for f in findings if f.code not in ("GS101", "GS230")]
    if findings and non_differentiable(facts):
        spans = _backward_spans(facts)
        findings = [
            f for f in findings
            if f.code not in BACKWARD_ONLY
            and not any(f.path == path and a <= f.line <= b for path, a, b in spans)
        ]
    return findings


def _backward_spans(facts: Facts) -> list[tuple[str, int, int]]:
    spans = []
    for name in ("backward", "vjp", "jvp"):
        method = facts.fc.methods.get(name)
        if method is not None:
            spans.append((method.source.path, method.node.lineno, method.node.end_lineno))
    return spans


def _text(expr: ast.expr) -> str:
    return ast.unparse(expr)


def non_differentiable(facts: Facts) -> bool:
    """Whether every value forward returns is passed to ``ctx.mark_non_differentiable``."""
    fwd = facts.method("forward")
    if fwd is None:
        return False
    marked: set[str] = set()
    for name in ("forward", "setup_context"):
        method = facts.method(name)
        if method is None:
            continue
        ctx = facts.ctx_of(method)
        for node in walk_shallow(method.node):
            if is_ctx_call(node, ctx, "mark_non_differentiable"):
                for arg in node.args:
                    marked.add(_text(arg.value) if isinstance(arg, ast.Starred) else _text(arg))
        if name == "setup_context" and len(method.params) >= 3 and method.params[2] in marked:
            return True
    if not marked:
        return False
    returned, covered = [], 0
    for node in walk_shallow(fwd.node):
        if isinstance(node, ast.Return):
            if node.value is None:
                return False
            if _text(node.value) in marked:
                covered += 1
            elif isinstance(node.value, ast.Tuple):
                returned.extend(node.value.elts)
            else:
                returned.append(node.value)
    if not returned and not covered:
        return False
    return all(_text(e.value if isinstance(e, ast.Starred) else e) in marked for e in returned)


__all__ = ["ECHOES", "ROOT_CAUSES", "non_differentiable", "prune"]
