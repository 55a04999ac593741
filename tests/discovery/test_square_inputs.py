"""Zero-config (batches of) square matrices where the code is written for them (issue 18,
corpus 8 held-out: DifferentiableSVD's ``ExponentialInverse`` was given (2, 4, 3) and (2, 3, 5)
matrices; its backward reshapes ``grad_output`` to (batch, n, n) with ``n`` the eigenvalue
matrix's size and raised, a false ``backward-error``). Reduced cases written here; references
are autograd of the same expression. A planted wrong backward still FAILs."""

import pytest
import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery.formula_domains import read_formula_domains
from gradsmith.discovery.hints import Hint
from gradsmith.discovery.synthesize import Synthesized, synthesize


def _spectral(wrong: bool = False):
    class Spectral(Function):
        """Q exp(-diag(L)) Q^T from eigenvectors Q and an eigenvalue matrix L (its diagonal
        read); backward reshapes the cotangent to (batch, n, n), n read off L."""

        @staticmethod
        def forward(ctx, first, second):
            vecs, vals = first, second
            scale = torch.diag_embed(torch.exp(-torch.diagonal(vals, dim1=1, dim2=2)))
            ctx.save_for_backward(vecs, vals)
            return vecs.bmm(scale).bmm(vecs.transpose(1, 2))

        @staticmethod
        def backward(ctx, g):
            vecs, vals = ctx.saved_tensors
            batch, n = vals.shape[0], vals.shape[1]
            g = g.reshape(batch, n, n)
            scale = torch.diag_embed(torch.exp(-torch.diagonal(vals, dim1=1, dim2=2)))
            sym = g if wrong else g + g.transpose(1, 2)  # planted: the transpose term missing
            d_vecs = sym.bmm(vecs).bmm(scale)
            inner = -scale.bmm(vecs.transpose(1, 2)).bmm(g).bmm(vecs)
            return d_vecs, torch.diag_embed(torch.diagonal(inner, dim1=1, dim2=2))

    return Spectral


def _reference(vecs, vals):
    scale = torch.diag_embed(torch.exp(-torch.diagonal(vals, dim1=1, dim2=2)))
    return vecs @ scale @ vecs.mT


def test_both_matrices_of_a_spectral_function_are_square_and_it_passes():
    fn = _spectral()
    found = synthesize(fn)
    assert isinstance(found, Synthesized), found
    vecs, vals = found.args
    assert vecs.shape[-1] == vecs.shape[-2] == vals.shape[-1] == vals.shape[-2]
    assert "square" in found.description
    report = gradsmith.check(fn, *found.args)
    assert report.passed, report
    g = torch.randn(vecs.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(torch.autograd.grad(fn.apply(vecs, vals), (vecs, vals), g),
                               torch.autograd.grad(_reference(vecs, vals), (vecs, vals), g))


def test_a_planted_wrong_backward_still_fails_on_square_inputs():
    fn = _spectral(wrong=True)
    found = synthesize(fn)
    assert isinstance(found, Synthesized), found
    report = gradsmith.check(fn, *found.args)
    assert "gradient-mismatch" in report.codes("error"), report


def _matrix_hints(source_fn, names):
    hints = {n: Hint() for n in names}
    read_formula_domains(source_fn, None, hints)
    return {n: (h.matrix, h.rank_min) for n, h in hints.items()}


def _reshaped(ctx, x, y):
    n = x.shape[1]
    return y.reshape(-1, n, n)


def _asserted(ctx, x, y):
    assert x.size(1) == x.size(2), "square matrices only"
    return x.sum(-1) * y


def _exponential(ctx, x, y):
    return torch.linalg.matrix_exp(x) @ y


def _shifted(ctx, x, y):
    return (x + 1e-3 * torch.eye(x.shape[-1]).to(x)) @ y


def _gram_only(ctx, x, y):
    return x @ x.mT + y  # a Gram matrix of features: x may be rectangular


@pytest.mark.parametrize(("source", "want"), [
    (_reshaped, {"x": ("square", 3), "y": (None, 0)}),
    (_asserted, {"x": ("square", 3), "y": (None, 0)}),
    (_exponential, {"x": ("square", 0), "y": (None, 0)}),
    (_shifted, {"x": ("square", 0), "y": (None, 0)}),
    (_gram_only, {"x": (None, 0), "y": (None, 0)}),
])
def test_signs_of_square_matrices_are_read(source, want):
    assert _matrix_hints(source, ["x", "y"]) == want


def _asserted_negative(ctx, x, y):
    if x.shape[-1] != x.shape[-2]:
        raise ValueError("square matrices only")
    return x.sum(-1) * y


def test_negative_axes_compared_are_read():
    assert _matrix_hints(_asserted_negative, ["x", "y"]) == {"x": ("square", 0), "y": (None, 0)}


def _ridge(ctx, x, lam):
    return x @ x.mT + lam * torch.eye(x.shape[0])  # lam scales the identity: not a matrix


def test_a_scale_of_the_identity_is_not_a_matrix():
    assert _matrix_hints(_ridge, ["x", "lam"])["lam"] == (None, 0)


@pytest.mark.parametrize("kind", ["square", "spd", "tril", "symmetric"])
def test_a_positive_retry_reports_the_range_its_matrices_have(kind):
    # corpus 8a: DifferentiableSVD's Power takes eig_diag.sqrt() of a square matrix; the
    # Inputs column said "in [0.5, 1.5)" of a randn matrix (positive was never passed on)
    from gradsmith.discovery.build import build_args
    from gradsmith.discovery.slots import Slot

    slot = Slot("vals", "tensor", hint=Hint(matrix=kind))
    (value,), (part,) = build_args([slot], [(2, 3, 3)], seed=0, positive=True)
    in_range = bool(((value >= 0.5) & (value < 1.5)).all())
    assert ("in [0.5, 1.5)" in part) == in_range, (part, value)
    if kind == "square":  # nothing but the shape asked: the retry's positive values
        assert in_range and torch.isfinite(value.sqrt()).all()
    else:  # the structure wins, and the column does not claim the range
        assert "in [0.5, 1.5)" not in part


def _eigenvalues(wrong: bool = False):
    class Eigenvalues(Function):
        """The (complex) eigenvalues of a real square matrix; backward V^-H diag(g) V^H."""

        @staticmethod
        def forward(ctx, a):
            vals, vecs = torch.linalg.eig(a)
            ctx.save_for_backward(vecs)
            return vals

        @staticmethod
        def backward(ctx, g):
            vecs, = ctx.saved_tensors
            # planted: V for V^-H, the shortcut of a normal matrix, wrong for a random one
            left = vecs if wrong else torch.linalg.inv(vecs).mH
            return (left @ torch.diag_embed(g) @ vecs.mH).real

    return Eigenvalues


def test_a_complex_output_of_a_real_square_matrix_is_checked_and_passes():
    # round 9 (corpus 9a, torch_linalg_ext's NormalMatrixEig): eig read the input as square,
    # but the probe refused the complex eigenvalues on every layout, a skip
    fn = _eigenvalues()
    found = synthesize(fn)
    assert isinstance(found, Synthesized), found
    (a,) = found.args
    assert a.shape[-1] == a.shape[-2] and not a.is_complex()
    assert gradsmith.check(fn, *found.args).passed
    g = torch.randn(a.shape[:-1], dtype=torch.complex128,
                    generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(torch.autograd.grad(fn.apply(a), a, g),
                               torch.autograd.grad(torch.linalg.eigvals(a), a, g))


def test_a_planted_wrong_eig_backward_fails():
    fn = _eigenvalues(wrong=True)
    found = synthesize(fn)
    assert isinstance(found, Synthesized), found
    report = gradsmith.check(fn, *found.args)
    assert "gradient-mismatch" in report.codes("error"), report


class _ComplexWritten(Function):
    """Eigenpairs of a complex normal matrix: backward V (diag(gL)) V^H returns a complex
    gradient, which autograd refuses for a real input."""

    @staticmethod
    def forward(ctx, a):
        vals, vecs = torch.linalg.eig(a)
        ctx.save_for_backward(vecs)
        return vals, vecs

    @staticmethod
    def backward(ctx, g_vals, g_vecs):
        vecs, = ctx.saved_tensors
        return vecs @ torch.diag_embed(g_vals) @ vecs.mH


class _ForgotReal(Function):
    """Re(fft(x)) of a real x; the planted defect: backward returns n * ifft(g) without .real."""

    @staticmethod
    def forward(ctx, x):
        return torch.fft.fft(x).real

    @staticmethod
    def backward(ctx, g):
        return torch.fft.ifft(g) * g.shape[-1]


def test_a_function_written_for_complex_inputs_is_checked_on_complex_ones():
    # torch_linalg_ext's NormalMatrixEig and Eigu (complex normal, unitary matrices): on the
    # real matrices synthesised, backward's complex gradient raised (a false backward-error,
    # then a skip saying so); now a complex normal matrix is synthesised and the Function
    # checked: this one's backward forgets the eigenvectors' term, and FAILs for it
    found = synthesize(_ComplexWritten)
    assert isinstance(found, Synthesized), found
    assert not found.doubt and "complex128 (4, 4) normal" in found.description, found
    (a,) = found.args
    vals, vecs = torch.linalg.eig(a.detach())
    torch.testing.assert_close(a.detach() @ a.detach().mH, a.detach().mH @ a.detach())
    # the reference: torch's eig autograd of a phase-invariant loss of the eigenvectors
    w = torch.randn(4, 4, dtype=torch.complex128, generator=torch.Generator().manual_seed(1))
    b, c = a.detach().clone().requires_grad_(), a.detach().clone().requires_grad_()
    want = torch.autograd.grad(((torch.linalg.eig(b)[1].conj() * w).sum(-2).abs() ** 2).sum(), b)
    got = torch.autograd.grad(((_ComplexWritten.apply(c)[1].conj() * w).sum(-2).abs() ** 2).sum(),
                              c, allow_unused=True)
    assert float(want[0].abs().max()) > 1e-3 and (got[0] is None or float(got[0].abs().max()) == 0)
    assert "gradient-mismatch" in gradsmith.check(_ComplexWritten, *found.args).codes("error")
    # only behind complex outputs: a real output's backward that forgets .real still FAILs
    found = synthesize(_ForgotReal)
    assert isinstance(found, Synthesized), found
    assert "complex" not in found.doubt, found.doubt
    assert "backward-error" in gradsmith.check(_ForgotReal, *found.args).codes("error")
    x = torch.randn(5, dtype=torch.float64, requires_grad=True)  # the reference: autograd
    g = torch.randn(5, dtype=torch.float64)
    want = torch.autograd.grad(torch.fft.fft(x).real, x, g)[0]
    torch.testing.assert_close((torch.fft.ifft(g) * 5).real, want)  # only .real was missing


class _EigPairs(Function):
    """Eigenvalues and eigenvectors of a real matrix; backward is torch's own (the reference),
    which refuses a cotangent that depends on the eigenvectors' arbitrary phase."""

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return torch.linalg.eig(a)

    @staticmethod
    def backward(ctx, g_vals, g_vecs):
        a, = ctx.saved_tensors
        with torch.enable_grad():
            b = a.detach().requires_grad_()
            return torch.autograd.grad(torch.linalg.eig(b), b, (g_vals, g_vecs))[0]


def test_torch_s_eigenvector_phase_error_on_synthesised_inputs_is_a_skip():
    # the check's random cotangent on complex eigenvectors is phase-dependent; torch's own
    # backward refuses it: not the Function's defect, so the row is a skip saying why
    from gradsmith.discovery.doubt import phase_doubt

    found = synthesize(_EigPairs)
    assert isinstance(found, Synthesized), found
    errors = gradsmith.check(_EigPairs, *found.args).errors
    assert "eigenvector phase" in phase_doubt(_EigPairs, [(f.code, f.message) for f in errors])
    wrong = gradsmith.check(_eigenvalues(wrong=True), *found.args).errors  # a real defect
    assert not phase_doubt(_EigPairs, [(f.code, f.message) for f in wrong])
