"""Surrogate terms fitted to what backward returns, for the estimator families real code uses.

A straight-through estimator of an element-wise forward (a spike ``(x > 0).float()``, a
rounding, a clipped quantizer) returns ``grad * d(x)`` for some derivative ``d``. Read from the
check's own numbers (``d = J^T v / v`` element by element), ``d`` is matched against the
families of surrogate gradients, each the derivative of a surrogate ``S = A * F(p * (x - s))``:

- smooth: ``sigmoid``, ``atan``, fast sigmoid ``u / (1 + |u|)`` (SuperSpike), ``tanh``,
  Gaussian ``erf``, exponential ``sign(u) (1 - exp(-|u|))``, log-abs ``sign(u) log(1 + |u|)``,
  a square wave's first Fourier term ``sin(u)``, an unbounded ``exp(u)`` (an exponential
  firing rate): slope ``p`` and amplitude ``A``
  fitted by least squares over a log-spaced search;
- piecewise: a constant (straight-through with a scale, ``c * x``), a rectangular window or a
  clipped quantizer (``c * x.clamp(lo, hi)``), a triangle (``c (1 - |x - s| / w)`` inside
  ``|x - s| < w``);
- a multi-Gaussian (a centre Gaussian less two wide side ones:
  :mod:`gradsmith.checker.multi_gaussian`).

The shift ``s`` is 0, a numeric forward argument (a threshold), or a step of a staircase
written into backward (``1`` for ``floor``'s first step, ``0.5`` for ``round``'s). Numbers are printed as the
shortest decimal that still fits (``25``, not ``24.999999998``), or after the forward argument
they equal (``alpha``, ``torch.pi / 2 * alpha``), so the line reads like the code it declares
and passes on fresh inputs. The caller verifies every term against backward before it is
suggested (:func:`gradsmith.checker.suggest.declaration`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator

import torch

from gradsmith.checker import element_scaled, multi_gaussian, periodic_offset
from gradsmith.checker.slope_fit import FIT, fit_screened, fit_smooth

# (surrogate F as Python source of u, its derivative F')
SMOOTH: dict[str, tuple[str, Callable[[torch.Tensor], torch.Tensor]]] = {
    "sigmoid": ("torch.sigmoid({u})", lambda u: torch.sigmoid(u) * (1 - torch.sigmoid(u))),
    "atan": ("torch.atan({u})", lambda u: 1 / (1 + u * u)),
    "fast-sigmoid": ("{u} / (1 + ({u}).abs())", lambda u: 1 / (1 + u.abs()) ** 2),
    "tanh": ("torch.tanh({u})", lambda u: 1 - torch.tanh(u) ** 2),
    "gaussian": ("torch.erf({u})", lambda u: 2 / math.sqrt(math.pi) * torch.exp(-u * u)),
    "exponential": ("torch.sign({u}) * (1 - torch.exp(-({u}).abs()))",
                    lambda u: torch.exp(-u.abs())),
    # a monotone gradient: a multi-level spike's (Matterhorn's max(floor(x), 0) "seen as"
    # log(1 + exp(x - 1)) has backward grad * sigmoid(x - 1))
    "softplus": ("torch.nn.functional.softplus({u})", torch.sigmoid),
    # a derivative that is a tanh: what a surrogate-gradient function argument synthesis
    # invented (tanh(v) * w) gives; the declaration then passes with that function
    "logcosh": ("torch.log(torch.cosh({u}))", torch.tanh),
    # the derivative of sign(u) log(1 + |u|): spikingjelly's nonzero-sign-log-abs surrogate
    # (backward grad / (1 / alpha + |x|))
    "log-abs": ("torch.sign({u}) * torch.log1p(({u}).abs())", lambda u: 1 / (1 + u.abs())),
}
# Periodic derivatives, fitted near 0 and confirmed on every value (see _fit_periodic): a
# cosine, a square wave's first Fourier term (backward 4 / T cos(2 pi x / T) grad).
PERIODIC: dict[str, tuple[str, Callable[[torch.Tensor], torch.Tensor]]] = {
    "sine": ("torch.sin({u})", torch.cos),
}


def terms(session, name: str, t: int, v: torch.Tensor, grad: torch.Tensor,
          numbers: list[tuple[str, float]], simple: Iterable[str]) -> Iterator[str]:
    """``simple`` first, then the fitted surrogate terms of input ``t`` (named ``name`` in the
    forward's signature), most specific first. Nothing is fitted unless ``simple`` runs out."""
    yield from simple
    problem = session.problem
    pieces = problem.split(v)
    x = problem.xs[t]
    if len(pieces) != 1 or pieces[0].numel() != x.numel() or x.is_complex():
        return  # only an element-wise forward has a derivative per element
    oracle = _Oracle(session, t)
    try:
        xv, d, pos = oracle.sample()
    except Exception:  # noqa: BLE001 - user code on other values: no fitted terms then
        return
    if d.numel() < 3 or not bool((d != 0).any()):
        return
    tensors = _same_shaped(session, t, x)
    shifts = ([("", torch.zeros_like(xv))] + [(f" - {n}", torch.full_like(xv, val))
                                                for n, val in numbers]
              + [(f" - {n}.detach()", a[pos]) for n, a in tensors])
    known = {val for _, val in numbers}
    smooth_only = [(f" - {c}", torch.full_like(xv, c)) for c in _STEPS if c not in known]
    for shift, values in shifts:
        u = xv - values
        yield from _piecewise(name + shift, u, d, numbers, oracle, values)
        for source, deriv, fit_of in _FITS:
            fit = fit_of(u, d, deriv)
            if fit is not None:
                yield from _render_smooth(name + shift, source, fit, numbers)
    for shift, values in smooth_only:  # a staircase's step as a literal: smooth families only
        for source, deriv, fit_of in _FITS:
            fit = fit_of(xv - values, d, deriv)
            if fit is not None:
                yield from _render_smooth(name + shift, source, fit, numbers)
    # the identity plus a cosine: a smooth staircase (x - sin(2 pi n x) / (2 pi n beta))
    yield from periodic_offset.terms(name, xv, d, numbers, _fit_periodic, _expressions, _factor)
    # a width or slope that is a tensor argument, element by element
    for shift, values in shifts:
        yield from element_scaled.terms(name + shift, xv - values, d, tensors, pos,
                                        [] if shift else _settings(session, tensors))
    # last (the costliest search): a centre Gaussian less two wide side ones (Yin et al.)
    yield from multi_gaussian.terms(name, xv, d)
    for n, a in tensors:  # straight-through scaled by another argument, element by element
        ratio = d * a[pos]
        if bool(((ratio - ratio[0]).abs() <= 1e-9 * ratio.abs().max()).all()):
            for c in _expressions(float(ratio.mean()), numbers):
                yield (f"{name} / {n}.detach()" if c == "1" else
                       f"{_factor(c)} * {name} / {n}.detach()")


def _fit_periodic(u: torch.Tensor, d: torch.Tensor, deriv) -> tuple[float, float] | None:
    """:func:`fit_smooth` where surrogate gradients live (``|u| <= 8``: with ``u = 1000`` in
    the sample the slope search cannot find a cosine's period), kept only when it holds on
    every value, the far ones included."""
    near = u.abs() <= 8
    if int(near.sum()) < 3:
        return None
    fit = fit_smooth(u[near], d[near], deriv)
    if fit is None:
        return None
    amplitude, slope = fit
    err = (d - amplitude * slope * deriv(slope * u)).abs().max() / d.abs().max()
    return fit if float(err) <= FIT else None


def _fit_exp(u: torch.Tensor, d: torch.Tensor, deriv) -> tuple[float, float] | None:
    """``d = A p exp(p u)``: a gradient that grows without bound, the expected spike of an
    exponential firing rate (``phi * exp(beta * (x - theta))`` drawn as a Bernoulli, backward
    its derivative). A line through ``log d`` (the relative residual of :func:`fit_smooth` is
    the largest value's alone here, which cannot tell the slope), confirmed on every value."""
    keep = d != 0
    if int(keep.sum()) < 3 or not (bool((d[keep] > 0).all()) or bool((d[keep] < 0).all())):
        return None
    uu, logs = u[keep], d[keep].abs().log()
    design = torch.stack([torch.ones_like(uu), uu], dim=1)
    a, p = (float(v) for v in torch.linalg.lstsq(design, logs.unsqueeze(1)).solution[:, 0])
    if not p > 0 or not math.isfinite(a):
        return None
    amplitude = math.copysign(math.exp(a), float(d[keep][0])) / p
    model = amplitude * p * torch.exp(p * u)
    if not bool(((model - d).abs() <= FIT * d.abs()).all()):
        return None
    return amplitude, p


# A gradient that grows without bound, fitted by _fit_exp.
GROWING: dict[str, tuple[str, Callable[[torch.Tensor], torch.Tensor]]] = {
    "exp": ("torch.exp({u})", torch.exp),
}
_FITS = ([(source, deriv, fit_screened) for source, deriv in SMOOTH.values()]
         + [(source, deriv, _fit_periodic) for source, deriv in PERIODIC.values()]
         + [(source, deriv, _fit_exp) for source, deriv in GROWING.values()])
_STEPS = (1, 0.5)  # where floor's and round's first steps are, written as literals in backward


class _Oracle:
    """Backward's derivative ``d(x)`` of the element-wise forward at chosen values of input
    ``t`` (every other argument as in the check), from the replayed random state."""

    # where surrogate gradients live, plus far values that find a clipping range's ends
    GRID = torch.cat([torch.linspace(-4, 4, 161, dtype=torch.float64),
                      torch.tensor([-1e3, -100, -30, -10, -6, 6, 10, 30, 100, 1e3],
                                   dtype=torch.float64)])

    def __init__(self, session, t: int):
        self.subject = session.subject
        self.t = t
        self.base = self.subject.base()

    def __call__(self, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(d, element index)`` for each value (element-wise: in chunks of the input)."""
        x = self.base[self.t]
        n = x.numel()
        ds, pos = [], []
        for chunk in values.split(n):
            filled = torch.cat([chunk, chunk[-1:].expand(n - len(chunk))]).to(x.dtype)
            leaf = filled.reshape(x.shape).clone().requires_grad_(True)
            xs = [b.clone() for b in self.base]
            xs[self.t] = leaf
            with torch.enable_grad():
                outs = self.subject.select(self.subject.call(xs))
                (g,) = torch.autograd.grad(outs, [leaf], [torch.ones_like(o) for o in outs],
                                           allow_unused=True)
            g = torch.zeros_like(leaf) if g is None else g
            ds.append(g.detach().reshape(-1)[:len(chunk)].to(torch.float64))
            pos.append(torch.arange(len(chunk)))
        return torch.cat(ds), torch.cat(pos)

    def sample(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x = self.base[self.t].detach().reshape(-1).to(torch.float64)
        values = torch.cat([x, self.GRID])
        d, pos = self(values)
        keep = torch.isfinite(d) & torch.isfinite(values)
        return values[keep], d[keep], pos[keep]

    def edge(self, outside: float, inside: float, base: float = 0.0) -> float:
        """Where ``d`` turns from ``base`` (at ``outside``) to another value (at ``inside``),
        by bisection."""
        a, b = outside, inside
        for _ in range(60):
            mid = (a + b) / 2
            if mid in (a, b):
                break
            d, _ = self(torch.tensor([mid], dtype=torch.float64))
            if float(d[0]) == base:
                a = mid
            else:
                b = mid
        return (a + b) / 2


def _settings(session, tensors: list[tuple[str, torch.Tensor]]
              ) -> list[tuple[str, torch.Tensor]]:
    """Those of ``tensors`` (by name) whose argument is not differentiated: a setting."""
    from gradsmith.checker.suggest import names

    learned = {n for n, a in zip(names(session), session.subject.args.values)
               if isinstance(a, torch.Tensor) and a.requires_grad}
    return [(n, a) for n, a in tensors if n not in learned]


def _same_shaped(session, t: int, x: torch.Tensor) -> list[tuple[str, torch.Tensor]]:
    """Floating tensor arguments shaped like input ``t`` (a per-element threshold or scale),
    by name, flattened; the input itself left out."""
    from gradsmith.checker.suggest import names

    args = session.subject.args
    own = args.position(t)
    found = []
    for i, (n, a) in enumerate(zip(names(session), args.values)):
        if (i != own and isinstance(a, torch.Tensor) and a.is_floating_point()
                and a.numel() == x.numel() and a.dim() > 0):
            found.append((n, a.detach().reshape(-1).to(torch.float64)))
    return found


def _render_smooth(arg: str, source: str, fit: tuple[float, float],
                   numbers: list[tuple[str, float]]) -> Iterator[str]:
    amplitude, slope = fit
    # a shifted argument needs parentheses only where the source uses it bare
    # (softplus(x - 1), but (x - 1) / (1 + (x - 1).abs()))
    bare = "{u}" in source.replace("({u})", "")
    for p in _expressions(slope, numbers):
        if p == "1":
            u = f"({arg})" if " - " in arg and bare else arg
        else:
            u = f"{_factor(p)} * ({arg})" if " - " in arg else f"{_factor(p)} * {arg}"
        body = source.format(u=u)
        for a in _expressions(amplitude, numbers):
            yield body if a == "1" else f"{_factor(a)} * {body}"


def _piecewise(name: str, x: torch.Tensor, d: torch.Tensor, numbers: list[tuple[str, float]],
               oracle: _Oracle, shift: torch.Tensor) -> Iterator[str]:
    """A constant (scaled straight-through), a window or clipping range, or a triangle; then
    the same on a leak: ``d`` is ``b`` outside a window (``leak * x + (k - leak) *
    x.clamp(min=0)``, ``c * x + (1 / (2 * w) - c) * x.clamp(-w, w)``), ``b`` the value at
    either far end."""
    yield from _window(name, x, d, numbers, oracle, shift, 0.0)
    scale = float(d.abs().max())
    ends = [float(d[x.argmin()]), float(d[x.argmax()])]
    for base in dict.fromkeys(b for b in ends if abs(b) > 1e-12 * scale):
        rest = d - base
        if not bool((rest.abs() > 1e-12 * scale).any()):
            continue  # a constant: the straight-through case above
        for body in _window(name, x, rest, numbers, oracle, shift, base):
            for b in _expressions(base, numbers):
                yield f"{name if b == '1' else f'{_factor(b)} * {name}'} + {body}"


def _window(name: str, x: torch.Tensor, d: torch.Tensor, numbers: list[tuple[str, float]],
            oracle: _Oracle, shift: torch.Tensor, base: float) -> Iterator[str]:
    """``d`` (backward's derivative less ``base``) as a constant, a window or a triangle."""
    scale = float(d.abs().max())
    inside = d.abs() > 1e-12 * scale
    values = d[inside]
    if not bool(((values - values[0]).abs() <= 1e-9 * scale).all()):
        if base == 0.0:
            yield from _triangle(name, x, d, inside, numbers)
        return
    c = float(values.mean())
    if bool(inside.all()):  # straight-through with a scale
        for a in _expressions(c, numbers):
            yield f"{_factor(a)} * {name}" if a != "1" else name
        return
    inner, outer = x[inside], x[~inside]
    if bool(((outer > inner.min()) & (outer < inner.max())).any()):
        return  # not one interval
    below, above = outer[outer < inner.min()], outer[outer > inner.max()]
    # bisect on the Function itself where the shift is one number for every element
    exact = bool((shift == shift[0]).all())
    offset = float(shift[0])

    def edge(out_u: float, in_u: float) -> float | None:
        return oracle.edge(out_u + offset, in_u + offset, base) - offset if exact else None

    lo = edge(float(below.max()), float(inner.min())) if below.numel() else None
    hi = edge(float(above.min()), float(inner.max())) if above.numel() else None
    # an edge bisected to within 1e-12 of 0 is 0 (x >= 0, not x >= -2e-20); verified after
    lo, hi = (0.0 if e is not None and abs(e) < 1e-12 else e for e in (lo, hi))
    bounds = []
    if lo is not None and hi is not None and math.isclose(-lo, hi, rel_tol=1e-9):
        bounds += [(f"-{w}" if not w.startswith("-") else w[1:], w)
                   for w in _expressions(hi, numbers)]
    bounds += [(a, b) for a in (_expressions(lo, numbers) if lo is not None else [None])
               for b in (_expressions(hi, numbers) if hi is not None else [None])]
    for a, b in dict.fromkeys(bounds):
        clamp = (f"({name}).clamp({a}, {b})" if a is not None and b is not None else
                 f"({name}).clamp(min={a})" if a is not None else f"({name}).clamp(max={b})")
        if " - " not in name:
            clamp = clamp[1:].replace(")", "", 1)
        for amp in _expressions(c, numbers):
            yield clamp if amp == "1" else f"{_factor(amp)} * {clamp}"


def _triangle(name, x, d, inside, numbers) -> Iterator[str]:
    """``c * max(0, 1 - |x| / w)``: a line in ``|x|`` inside, 0 outside."""
    r = x[inside].abs()
    if r.numel() < 2 or float(r.max() - r.min()) == 0:
        return
    design = torch.stack([torch.ones_like(r), r], dim=1)
    sol = torch.linalg.lstsq(design, d[inside].unsqueeze(1)).solution.reshape(-1)
    c, slope = float(sol[0]), float(sol[1])
    if slope >= 0 or c <= 0:
        return
    w = -c / slope
    model = c * (1 - x.abs() / w).clamp(min=0)
    if float((model - d).abs().max()) > FIT * float(d.abs().max()):
        return
    for ws in _expressions(w, numbers):
        for cs in _expressions(c * w, numbers):
            y = f"({name} / {_factor(ws)}).clamp(-1, 1)"
            body = f"({y} - {y} * {y}.abs() / 2)"
            yield body if cs == "1" else f"{_factor(cs)} * {body}"


def _expressions(value: float, numbers: list[tuple[str, float]]) -> list[str]:
    """``value`` as Python source: a forward argument times a common factor, then the
    shortest decimal within 1e-9 (relative), then as a multiple of pi."""
    out = []
    for name, arg in numbers:
        if arg == 0:
            continue
        for factor, text in ((1.0, "{n}"), (2.0, "2 * {n}"), (0.5, "{n} / 2"),
                             (math.pi, "torch.pi * {n}"), (math.pi / 2, "torch.pi / 2 * {n}"),
                             (2 * math.pi, "2 * torch.pi * {n}"),
                             (1 / math.pi, "{n} / torch.pi"), (-1.0, "-{n}")):
            if math.isclose(value, factor * arg, rel_tol=1e-9):
                out.append(text.format(n=name))
        # an amplitude that undoes a slope (SuperSpike's 1 / beta, atan's 1 / (pi^2 alpha))
        for factor, text in ((1.0, "1 / {n}"), (math.pi, "1 / (torch.pi * {n})"),
                             (math.pi ** 2, "1 / (torch.pi ** 2 * {n})")):
            if math.isclose(value * factor * arg, 1.0, rel_tol=1e-9):
                out.append(text.format(n=name))
    short = _shortest(value)
    if len(short.lstrip("-")) <= 5:
        out.append(short)
    for form, q in (("{q} * torch.pi", value / math.pi), ("{q} / torch.pi", value * math.pi),
                    ("1 / {q}", 1 / value if value else math.inf),
                    ("{q} ** 0.5", value * value if value > 0 else math.inf),
                    ("1 / {q} ** 0.5", 1 / (value * value) if value > 0 else math.inf)):
        text = _shortest(q) if math.isfinite(q) else ""
        if text and len(text.lstrip("-")) <= 5:
            out.append(form.format(q=text).replace("1 * torch.pi", "torch.pi"))
    out.append(short)
    return list(dict.fromkeys(out))


def _factor(source: str) -> str:
    """``source`` ready to multiply or divide by: parenthesised unless it is one token."""
    return source if " " not in source and "**" not in source else f"({source})"


def _shortest(value: float) -> str:
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))  # 10, not 1e+01
    for digits in range(1, 18):
        text = f"{value:.{digits}g}"
        if math.isclose(float(text), value, rel_tol=1e-9, abs_tol=0.0):
            return "1" if float(text) == 1 else text
    return repr(value)
