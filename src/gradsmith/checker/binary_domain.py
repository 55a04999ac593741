"""Gradients of Functions written for 0/1 inputs, checked on 0/1 inputs (private).

Spiking networks combine spike tensors (values 0 or 1) by logic gates written however is
fastest: ``relu(y - x)`` for ``(1 - x) y``, ``(x + y == 0).to(x)`` for ``(1 - x)(1 - y)``,
``(x + y) % 2`` for ``x + y - 2xy``. On spikes each equals its multilinear polynomial, and
backward returns that polynomial's gradient (corpus 14, issue 18). On Gaussian inputs forward
is not the polynomial (and ``% 2`` is discontinuous at the spikes themselves), so finite
differences there or a step across 0/1 call a correct gate a ``gradient-mismatch``.

The code says which domain it is written for when its docstring holds a truth table: a header
whose leading columns are forward's inputs (``x y z dx dy``) and rows whose leading entries
enumerate every 0/1 combination. Then the gradient is checked where it is defined: at 0/1
inputs against the multilinear extension's, element by element
``f(x_j = 1) - f(x_j = 0)`` (exact for any function on 0/1 values, no step to choose). A
backward that returns something else fails: ``undeclared-estimator`` where it returns what the
table's own gradient columns say (a surrogate the author wrote down), ``gradient-mismatch``
otherwise (a swapped or negated gradient). The table's output column must agree with forward
at every vertex, so a table describing some other function is not used.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

import torch

from gradsmith.checker.problem import Problem
from gradsmith.checker.report import Finding
from gradsmith.checker.session import Session

_ELEMENTS = 256  # inputs larger than this: 64 elements drawn (two forwards each)
_ROW = re.compile(r"^\s*-?\d+(\s+-?\d+)+\s*$")


def truth_table(doc: str | None, labels: list[str]) -> dict[str, Any] | None:
    """The docstring's truth table over ``labels``: ``{"rows": [...], "out": i | None,
    "grads": {label: column}}``, or None when it has none enumerating every 0/1 combination.

    Example:
        >>> t = truth_table('''x y z dx dy
        ... 0 0 0 0 0
        ... 0 1 0 1 0
        ... 1 0 0 0 1
        ... 1 1 1 1 1''', ["x", "y"])
        >>> t["out"], t["grads"], len(t["rows"])
        (2, {'x': 3, 'y': 4}, 4)
        >>> truth_table("| a | out |\\n|---|---|\\n| 0 | 1 |\\n| 1 | 0 |", ["a"])["rows"]
        [[0, 1], [1, 0]]
    """
    if not doc or not labels:
        return None
    lines = [re.sub(r"[|,]", " ", line) for line in doc.splitlines()]  # markdown tables too
    k = len(labels)
    for i, line in enumerate(lines):
        head = line.split()
        if head[:k] != labels or len(head) <= k:
            continue
        rows = []
        for row in lines[i + 1:]:
            if not row.strip() or set(row.strip()) <= set("-:+ "):
                if rows:
                    break
                continue
            if not _ROW.match(row) or len(row.split()) != len(head):
                break
            rows.append([int(v) for v in row.split()])
        if {tuple(r[:k]) for r in rows} != set(itertools.product((0, 1), repeat=k)):
            continue
        grads = {n: head.index(c) for n in labels for c in (f"d{n}", f"grad_{n}")
                 if c in head}
        rest = [c for c in range(k, len(head)) if c not in grads.values()]
        return {"rows": rows, "out": rest[0] if len(rest) == 1 else None, "grads": grads}
    return None


def applies(session: Session, problem: Problem) -> dict[str, Any] | None:
    """The truth table when every input of ``problem`` is a floating tensor the code's
    docstring tabulates on 0/1 values and forward agrees with its output column."""
    cls = session.function_cls
    if cls is None or not all(x.is_floating_point() for x in problem.xs):
        return None
    labels = [label.split("[")[0] for label in problem.labels]
    table = truth_table(cls.__doc__, labels)
    if table is None or table["out"] is None:
        return None
    for row in table["rows"]:
        xs = [torch.full_like(x, float(b)) for x, b in zip(problem.xs, row)]
        try:
            value = problem.value(xs, frozenset(range(len(xs))))
        except Exception:  # noqa: BLE001 - user code may raise anything
            return None
        if value.numel() == 0 or not torch.allclose(value, torch.full_like(
                value, float(row[table["out"]]))):
            return None
    return table


def run(session: Session, problem: Problem, table: dict[str, Any]) -> list[Finding]:
    """Compare backward with the multilinear gradient at 0/1 inputs (each combination
    present where the shapes allow); findings as the module docstring says."""
    gen = session.generator(41)
    binary = binary_problem(session, problem)
    xs = binary.xs
    m = binary.value().numel()
    differences = [_multilinear(binary, t, gen) for t in range(len(xs))]  # once per input
    s = session.settings
    worst = []
    for _ in range(2):
        v = torch.randn(m, generator=gen, dtype=torch.float64).to(binary.value().dtype)
        got = binary.vjp(v)
        for t in range(len(xs)):
            idx, diffs = differences[t]
            want = diffs @ v.to(diffs.dtype)
            mine = got[t].flatten()[idx]
            bad = (mine - want).abs() > s.atol + s.rtol * want.abs()
            if bad.any():
                i = int(bad.nonzero()[0])
                worst.append((t, int(idx[i]), float(mine[i]), float(want[i])))
        if worst:
            break
    if not worst:
        return [Finding(
            "binary-domain", "info",
            "inputs " + ", ".join(problem.labels) + " are 0/1 values (the docstring's truth "
            "table): the gradient was checked at 0/1 inputs against the multilinear "
            "extension's (f(x_j = 1) - f(x_j = 0)), where the code's polynomial is defined, "
            "and held", "nothing", "gradients")]
    tabled = _as_tabled(binary, table)
    bad_labels = sorted({problem.labels[t] for t, *_ in worst})
    t, j, a, w = worst[0]
    where = (f"at 0/1 inputs (the docstring's truth table), {problem.labels[t]} element {j}: "
             f"backward {a:.6g}, the multilinear gradient f(x_j = 1) - f(x_j = 0) {w:.6g}")
    if tabled:
        line, verified = declaration(session, binary, table)
        how = (f"declare it: `{line}` (checked at 0/1 inputs: backward returns the table's "
               "gradient columns)" if verified else "declare it with intended=")
        return [Finding(
            "undeclared-estimator", "error",
            f"backward is not the gradient of forward on the 0/1 values it is written for "
            f"but the gradient columns of its own truth table (a surrogate): {where}",
            f"if it is intended, {how}; if not, return the multilinear gradient",
            "gradients", bad_labels[0], {"binary_domain": True, "declaration": line,
                                         "verified": verified})]
    return [Finding(
        "gradient-mismatch", "error",
        f"gradient of {', '.join(bad_labels)} disagrees with the multilinear gradient {where}",
        "re-derive backward from forward's polynomial on 0/1 values", "gradients",
        bad_labels[0], {"binary_domain": True})]


def _cover(xs: list[torch.Tensor]) -> None:
    """Write every 0/1 combination into the first elements when the inputs share one shape."""
    if len({tuple(x.shape) for x in xs}) != 1 or xs[0].numel() < 2 ** len(xs):
        return
    for j, combo in enumerate(itertools.product((0.0, 1.0), repeat=len(xs))):
        for x, b in zip(xs, combo):
            x.view(-1)[j] = b


def _multilinear(problem: Problem, t: int, gen: torch.Generator
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """Element indices of input ``t`` (all, or 64 drawn from a large input) and, per index
    ``j``, ``f(x_t[j] = 1) - f(x_t[j] = 0)``: the multilinear gradient's rows (``@ v``)."""
    x = problem.xs[t]
    n = x.numel()
    idx = torch.arange(n) if n <= _ELEMENTS else torch.randperm(n, generator=gen)[:64]
    rows = []
    for j in idx.tolist():
        values = []
        for b in (1.0, 0.0):
            xs = list(problem.xs)
            xs[t] = x.clone()
            xs[t].view(-1)[j] = b
            values.append(problem.value(xs, frozenset((t,))))
        rows.append(values[0] - values[1])
    return idx, torch.stack(rows)


def _as_tabled(problem: Problem, table: dict[str, Any]) -> bool:
    """Whether backward returns the table's gradient columns at every tabulated vertex
    (one-element inputs set to the row, grad_output 1)."""
    labels = [label.split("[")[0] for label in problem.labels]
    if set(table["grads"]) != set(labels):
        return False
    for row in table["rows"]:
        xs = [torch.full((1,), float(b), dtype=x.dtype) for x, b in zip(problem.xs, row)]
        one = Problem(problem.f, xs, problem.labels, problem._out_labels,
                      problem.accumulate, backward_seed=problem.backward_seed)
        try:
            got = one.vjp(torch.ones(one.value().numel(), dtype=xs[0].dtype))
        except Exception:  # noqa: BLE001 - user code may raise anything
            return False
        for n, g in zip(labels, got):
            if g.numel() != 1 or float(g.sum()) != row[table["grads"][n]]:
                return False
    return True


def binary_problem(session: Session, problem: Problem) -> Problem:
    """``problem`` at 0/1 inputs of the same shapes (every combination present where the
    shapes allow): where the declared surrogate of a gate is checked too (surrogate)."""
    gen = session.generator(43)
    xs = [torch.randint(0, 2, x.shape, generator=gen).to(x) for x in problem.xs]
    _cover(xs)
    return Problem(problem.f, xs, problem.labels, problem._out_labels, problem.accumulate,
                   backward_seed=problem.backward_seed)


def declaration(session: Session, binary: Problem, table: dict[str, Any]
                ) -> tuple[str | None, bool]:
    """The ``intended=`` line returning the table's gradient columns (each written as the
    multilinear polynomial through the tabulated values) times the incoming gradient, and
    whether backward returns it at the 0/1 inputs ``binary``; None where forward takes more
    than the tabulated tensors or returns more than one output."""
    from gradsmith.checker import suggest  # the other declaration writers' helpers

    names = suggest.names(session)
    labels = [label.split("[")[0] for label in binary.labels]
    if names != labels or len(binary.out_shapes or [None]) != 1:
        return None, False
    grad = suggest.grad_name(names)
    body = ", ".join(f"({_polynomial(table, c, names)}) * {grad}"
                     for c in (table["grads"][n] for n in names))
    source = f"lambda {', '.join(names)}, {grad}: ({body},)"
    factory = f"lambda: {suggest.render_args(session.subject.args.values, home=suggest._home(session))}"
    line = f"@gradsmith.example({factory}, intended={source})"
    fn = suggest.compile_source(source, session)
    v = torch.randn(binary.m, generator=session.generator(47), dtype=binary.xs[0].dtype)
    try:
        got, want = binary.vjp(v), fn(*binary.xs, *binary.split(v))
    except Exception:  # noqa: BLE001 - user code may raise anything
        return line, False
    return line, all(suggest.matches(a, b, session) for a, b in zip(got, want))


def _polynomial(table: dict[str, Any], column: int, names: list[str]) -> str:
    """The multilinear polynomial taking column ``column``'s value at each row's 0/1 inputs.

    Example:
        >>> t = {"rows": [[0, 0, 1], [0, 1, 0], [1, 0, 0], [1, 1, -1]]}
        >>> _polynomial(t, 2, ["x", "y"])
        '(1 - x) * (1 - y) - x * y'
    """
    text = ""
    for row in table["rows"]:
        c = row[column]
        if c == 0:
            continue
        term = " * ".join(n if b else f"(1 - {n})" for n, b in zip(names, row))
        sign = ("-" if c < 0 else "") if not text else (" - " if c < 0 else " + ")
        text += sign + (term if abs(c) == 1 else f"{abs(c)} * {term}")
    return text or f"0 * {names[0]}"
