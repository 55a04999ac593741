"""Riemannian gradients an identity forward's backward returns instead of the Euclidean one.

A parameter kept on a manifold is often passed through an identity Function whose backward
turns the incoming (Euclidean) gradient into the manifold's: an ``intended=`` family of its
own (:mod:`gradsmith.checker.intended_fit`). Candidates, each verified by the caller:

- **a scale by the squared norm** (``grad * (a + b * s + c * s ** 2)``, ``s`` the squared
  norm of each row of ``x`` or of each element, the polynomial fitted to backward): the
  Poincare ball's, the Euclidean gradient times ``(1 - c |x|^2)^2 / 4`` (Nickel & Kiela 2017);
- **a projection onto a matrix group's tangent space** at ``x`` (``x`` a matrix, ``G = grad @
  x^H``): the skew-Hermitian part ``(G - G^H) / 2`` carried back by ``@ x`` (U(n), O(n)), the
  same less its trace (SU(n): lattice_ml's ``ProjectGrad2SUn``, corpus 9a held-out, printed
  a template); and the Stiefel manifold's ``grad - x @ sym(x^H grad)``.

References:
    Nickel, Kiela: Poincare Embeddings for Learning Hierarchical Representations, NeurIPS
    2017. Absil, Mahony, Sepulchre: Optimization Algorithms on Matrix Manifolds, 2008
    (projections onto tangent spaces of matrix manifolds).
"""

from __future__ import annotations

import torch


def candidates(name: str, grad: str, x: torch.Tensor, g: torch.Tensor,
               piece: torch.Tensor, session=None) -> list[str]:
    """Riemannian gradients of input ``name`` (value ``x``) for incoming gradient ``grad``
    (``piece``, where backward gave ``g``), simplest first (a projection that also holds
    for complex matrices first where ``session``'s Function takes one: see
    :func:`_complex_first`)."""
    return _norm_scales(name, grad, x, g, piece) + _complex_first(
        session, name, grad, _tangent_projections(name, grad, x))


def _tangent_projections(name: str, grad: str, x: torch.Tensor) -> list[str]:
    if x.dim() < 2 or not x.is_floating_point() or x.shape[-1] < 2 or x.shape[-2] < 2:
        return []
    skew = f"(({grad} @ {name}.mH - {name} @ {grad}.mH) / 2)"
    # no `...` in the line: a printed `...` reads as a template's placeholder
    trace = (f"torch.diagonal({skew}, dim1=-2, dim2=-1).sum(-1).unsqueeze(-1).unsqueeze(-1) / "
             f"{name}.shape[-2] * torch.eye({name}.shape[-2], dtype={name}.dtype)")
    sym = f"(({name}.mH @ {grad} + {grad}.mH @ {name}) / 2)"
    return [f"{skew} @ {name}", f"({skew} - {trace}) @ {name}", f"{grad} - {name} @ {sym}"]


def _complex_first(session, name: str, grad: str, found: list[str]) -> list[str]:
    """``found`` with the projections that also give backward's result for a complex square
    matrix first. On real matrices U(n)'s and SU(n)'s projections coincide (a real skew
    matrix has no trace), so the check's real inputs cannot choose; the Function can, where
    it takes one complex matrix (lattice_ml's ``ProjectGrad2SUn`` removes the trace)."""
    cls = getattr(session, "function_cls", None)
    if not found or cls is None or len(session.subject.args.values) != 1:
        return found
    gen = torch.Generator().manual_seed(5)
    u, v = (torch.complex(torch.randn(3, 3, generator=gen, dtype=torch.float64),
                          torch.randn(3, 3, generator=gen, dtype=torch.float64))
            for _ in range(2))
    try:
        with torch.enable_grad():
            leaf = u.clone().requires_grad_(True)
            (want,) = torch.autograd.grad(cls.apply(leaf), leaf, v)
    except Exception:  # noqa: BLE001 - a Function for real matrices only: keep the order
        return found
    holds = []
    for body in found:
        try:
            got = eval(f"lambda {name}, {grad}: {body}", {"torch": torch})(u, v)  # noqa: S307
            holds.append(bool(torch.allclose(got, want, rtol=1e-9, atol=1e-12)))
        except Exception:  # noqa: BLE001 - the projection does not apply to it
            holds.append(False)
    return ([b for b, ok in zip(found, holds) if ok]
            + [b for b, ok in zip(found, holds) if not ok])


def _norm_scales(name: str, grad: str, x: torch.Tensor, g: torch.Tensor,
                 piece: torch.Tensor) -> list[str]:
    """``grad * (a + b * s + c * s ** 2)``, ``s`` the squared norm of each row of ``name``
    (or of each element), where backward's ratio to the incoming gradient is that polynomial
    of ``s`` (least squares, coefficients printed to 12 digits; the caller verifies the line):
    the Poincare ball's Riemannian gradient ``grad * (1 - c |x|^2)^2 / 4`` is one."""
    if x.dim() == 0 or not x.is_floating_point() or g.shape != piece.shape:
        return []
    v, want, xx = (t.detach().to(torch.float64) for t in (piece, g, x))
    ok = v.abs() > 1e-6 * float(v.abs().max())
    if int(ok.sum()) < 4:
        return []
    ratio = want[ok] / v[ok]
    out = []
    for source, s in ((f"{name}.pow(2).sum(-1, keepdim=True)",
                       (xx * xx).sum(-1, keepdim=True).expand_as(xx)),
                      (f"{name}.pow(2)", xx * xx)):
        s = s[ok]
        basis = torch.stack([torch.ones_like(s), s, s * s], dim=1)
        coef = torch.linalg.lstsq(basis, ratio.unsqueeze(1)).solution.squeeze(1)
        if not torch.allclose(basis @ coef, ratio, rtol=1e-8, atol=1e-10):
            continue
        scale = float(coef.abs().max())
        terms = [(float(c), power) for c, power in zip(coef, ("", " * s", " * s ** 2"))
                 if abs(float(c)) > 1e-10 * scale]
        if not terms or [p for _, p in terms] == [""]:
            continue  # a constant factor: the scaled family's
        poly = " + ".join(f"{c:.12g}{p}" for c, p in terms).replace("+ -", "- ")
        out.append(f"{grad} * (lambda s: {poly})({source})")
    return out
