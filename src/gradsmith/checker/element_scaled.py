"""Surrogate terms whose width or slope is a tensor argument, element by element.

A spike's surrogate often takes its width from an argument: ``clamp(1 - |m - thr| / slope,
min=0)`` with ``slope`` a tensor (corpus 9b held-out ``TTFSSpikeFunction``; synthesised with
the input's shape, it differs per element). No single-number fit of
:mod:`gradsmith.checker.surrogate_fit` describes it. Read in ``z = u / a`` (a width) or ``z =
u * a`` (a slope), with ``a`` that argument's value at each element, the derivative is one of
the usual families again, up to a factor ``a ** e`` (``e`` in -1, 0, 1: a triangle of peak 1,
a sigmoid's ``alpha * s * (1 - s)``, a Gaussian normalised by its width). Fitted there with
literal numbers only (the scale is the argument's), each term is written as the surrogate
``S`` with ``dS/du`` that derivative: ``a ** k * F(z)``. A triangle is first tried as the code
writes it, ``c * clamp(1 - |u| / a, min=0)`` (or ``|u| * a``), with a surrogate that holds
for either sign of ``a`` (a width drawn negative makes the code's triangle an unbounded V,
which no clamp of ``u / a`` describes).
Scale-learning binarisers also take the amplitude from a second tensor argument and the
slope from a first one's magnitude: IRNet's ``k * t * (1 - tanh(t * x) ** 2)`` and RBNN's
``k * (sqrt(2) |t| - t ** 2 |x|)_+`` (corpus 10b held-out, spent), ``k`` and ``t`` synthesised
with the input's shape. Where no term of one argument fits, each other same-shaped argument
``b`` is tried as the amplitude (``d / b``, written ``b.detach() * S``) and each argument of
both signs also by its magnitude (``|t|``, written ``t.detach().abs()``): ``k.detach() *
torch.tanh(x * t.detach())``. These come after every one-argument term, so a line that
fitted before is printed as before.
The caller verifies every term.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

#: (a width?, exponent e: the derivative times a ** e is the family's) tried per argument:
#: a triangle of peak 1 and a width-normalised one, a slope's s(1 - s) and alpha * s(1 - s).
ROLES = ((True, 0), (True, 1), (False, 0), (False, -1))


def terms(name: str, u: torch.Tensor, d: torch.Tensor,
          tensors: list[tuple[str, torch.Tensor]], pos: torch.Tensor,
          pairs: list[tuple[str, torch.Tensor]] | None = None) -> Iterator[str]:
    """Terms of ``u`` (written ``name``) for backward's derivative ``d``, each tensor argument
    ``(n, values)`` (flattened, indexed by ``pos``) as the width or slope per element;
    ``pairs`` (all of ``tensors`` when None): the arguments tried as an amplitude with a slope
    from another. The binarisers that do this take both as settings (no gradient) and are not
    shifted: asked for every shift and every argument, this search, quadratic in the
    arguments, took 20 s of a batch norm's 27 (five same-shaped tensors, three learned)."""
    from gradsmith.checker import surrogate_fit as sf  # it calls this module

    arg = f"({name})" if " " in name else name
    for n, values in tensors:
        a = values[pos]
        if not bool(torch.isfinite(a).all()) or not bool((a != 0).all()):
            continue
        src = f"{n}.detach()"
        yield from _triangles(arg, u, d, a, src, sf)
        yield from _scaled_terms(arg, u, d, a, src, sf)
    # an amplitude from another argument, a slope from an argument's magnitude (IRNet, RBNN)
    pairs = tensors if pairs is None else pairs
    for n, values in pairs:
        a = values[pos]
        if not bool(torch.isfinite(a).all()) or not bool((a != 0).all()):
            continue
        slopes = [(a, f"{n}.detach()")]
        if bool((a < 0).any()) and bool((a > 0).any()):
            slopes.append((a.abs(), f"{n}.detach().abs()"))
        for m, amp in pairs:
            b = amp[pos]
            if m == n or not bool(torch.isfinite(b).all()) or not bool((b != 0).all()):
                continue
            for slope, src in slopes:
                roles = ROLES if slope is a else MAGNITUDE_ROLES
                for term in _scaled_terms(arg, u, d / b, slope, src, sf, roles, signed=True):
                    yield f"{m}.detach() * {sf._factor(term)}"
        if len(slopes) > 1:  # the magnitude alone
            yield from _scaled_terms(arg, u, d, *slopes[1], sf, MAGNITUDE_ROLES, signed=True)


#: The roles in which ``|a|`` differs from ``a``: the families' derivatives are even, so
#: without a factor ``a ** e`` the magnitude would only repeat the fits of ``a`` itself.
MAGNITUDE_ROLES = tuple(role for role in ROLES if role[1] != 0)


def _scaled_terms(arg: str, u: torch.Tensor, d: torch.Tensor, a: torch.Tensor, src: str,
                  sf, roles=ROLES, signed: bool = False) -> Iterator[str]:
    """The families in ``u / a`` (a width) or ``u * a`` (a slope), ``a`` written ``src``;
    ``signed``: only where the scaled derivative keeps one sign, as every family but the
    periodic one does (a cheap test that spares the slope searches of a wrong pairing)."""
    for width, e in roles:
        z = u / a if width else u * a
        zname = f"({arg} / {src})" if width else f"({arg} * {src})"
        dd = d * a ** e
        if signed and bool((dd > 0).any()) and bool((dd < 0).any()):
            continue
        # S = a ** power * F(z): dS/du = a ** (power - 1) * F'(z) when z = u / a
        power = 1 - e if width else -1 - e
        scale = (lambda t: t) if power == 0 else (
            (lambda t, s=src: f"{s} * {t}") if power == 1 else
            (lambda t, s=src: f"({t}) / {s}"))
        inside = dd.abs() > 1e-12 * float(dd.abs().max())
        for term in sf._triangle(zname, z, dd, inside, []):
            yield scale(term.replace(" / 1).clamp(", ").clamp("))
        for source, deriv, fit_of in sf._FITS:
            fit = fit_of(z, dd, deriv)
            if fit is not None:
                for term in sf._render_smooth(zname, source, fit, []):
                    yield scale(term)


def _triangles(arg: str, u: torch.Tensor, d: torch.Tensor, a: torch.Tensor, src: str,
               sf) -> Iterator[str]:
    """``c * clamp(1 - |u| / a, min=0)`` and ``c * clamp(1 - |u| * a, min=0)`` as written: the
    surrogate ``v / 2 * (1 + r(v))``, ``r`` that clamp and ``v`` the input clipped to the
    triangle's edges (none where the width is negative: the V grows without bound), whose
    autograd is the triangle at 0 too (``sign(u)`` there would give 0)."""
    bare = _unwrapped(arg)
    for width in (True, False):
        r = (1 - (u.abs() / a if width else u.abs() * a)).clamp(min=0)
        rr = float((r * r).sum())
        if rr == 0:
            continue
        c = float((d * r).sum()) / rr
        if c == 0 or float((d - c * r).abs().max()) > sf.FIT * float(d.abs().max()):
            continue
        edge = src if width else f"1 / {src}"
        clipped = (f"(clip_ := ({bare}).clamp(-(edge_ := torch.where({src} > 0, {edge}, "
                   f"torch.inf)), edge_))")
        scaled = f"clip_.abs() / {src}" if width else f"clip_.abs() * {src}"
        body = f"{clipped} / 2 * (1 + (1 - {scaled}).clamp(min=0))"
        for cs in sf._expressions(c, []):
            yield body if cs == "1" else f"{sf._factor(cs)} * {body}"


def _unwrapped(source: str) -> str:
    """``source`` without the parentheses around all of it, if it has them."""
    if not (source.startswith("(") and source.endswith(")")):
        return source
    depth = 0
    for i, ch in enumerate(source):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and i < len(source) - 1:
            return source  # "(a) * (b)": the first pair closes early
    return source[1:-1]
