"""A matrix a decomposition takes is tried tall, wide and square (issue 18, corpus 11 part a:
an eigen-decomposition of ``A A^T`` computed from ``svd(A)`` whose backward leaves out the
null-space term of the eigenvector derivative, needed only when ``A`` is tall, passed on the
wide matrices synthesised). Reduced cases, written here: the eigenvalues and eigenvectors of
``A A^T`` from ``svd(A)``, with the complete backward (right for every aspect) and with the
null-space term left out (right for wide and square ``A`` only)."""

import torch
from source_cases import check_rows

from gradsmith.discovery.hints import Hint
from gradsmith.discovery.matrices import read_matrices

SOURCE = '''
import torch


class GramEig(torch.autograd.Function):
    """Eigenvalues and eigenvectors of A A^T without forming it; any aspect of A."""

    @staticmethod
    def forward(ctx, mat):
        vecs, vals, _ = torch.svd(mat)
        vals = vals ** 2
        ctx.save_for_backward(mat, vals, vecs)
        return vals, vecs

    @staticmethod
    def backward(ctx, grad_vals, grad_vecs):
        mat, vals, vecs = ctx.saved_tensors
        n = vals.shape[0]
        eye = torch.eye(n, dtype=vals.dtype)
        gap = vals.unsqueeze(0) - vals.unsqueeze(1)
        f = 1 / (gap + eye) - eye
        inner = torch.diag(grad_vals) + f * (vecs.t() @ grad_vecs)
        grad_l = vecs @ inner @ vecs.t()
        {null_space}
        return (grad_l + grad_l.t()) @ mat
'''
COMPLETE = ("outside = grad_vecs - vecs @ (vecs.t() @ grad_vecs)\n"
            "        grad_l = grad_l + outside @ torch.diag(1 / vals) @ vecs.t()")
LEFT_OUT = "pass"


def _reference(mat, g_vals, g_vecs):
    """Autograd through torch.linalg.eigh of A A^T, the leading eigenpairs, signs aligned."""
    a = mat.detach().clone().requires_grad_()
    vals, vecs = torch.linalg.eigh(a @ a.t())
    k = min(a.shape)
    vals, vecs = vals.flip(0)[:k], vecs.flip(1)[:, :k]
    u = torch.linalg.svd(mat.detach(), full_matrices=False)[0]
    vecs = vecs * torch.sign((vecs * u).sum(0)).detach()
    return torch.autograd.grad((vals * g_vals).sum() + (vecs * g_vecs).sum(), a)[0]


def test_the_complete_backward_agrees_with_eigh_and_the_left_out_one_only_when_wide(tmp_path):
    import importlib.util

    for name, body, tall_right in (("complete", COMPLETE, True), ("left_out", LEFT_OUT, False)):
        path = tmp_path / f"gram_{name}.py"
        path.write_text(SOURCE.format(null_space=body))
        spec = importlib.util.spec_from_file_location(f"gram_{name}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        gen = torch.Generator().manual_seed(3)
        for shape in ((3, 5), (5, 3), (4, 4)):
            mat = torch.randn(shape, dtype=torch.float64, generator=gen, requires_grad=True)
            k = min(shape)
            g_vals = torch.randn(k, dtype=torch.float64, generator=gen)
            g_vecs = torch.randn(shape[0], k, dtype=torch.float64, generator=gen)
            vals, vecs = module.GramEig.apply(mat)
            got = torch.autograd.grad((vals * g_vals).sum() + (vecs * g_vecs).sum(), mat)[0]
            want = _reference(mat, g_vals, g_vecs)
            agrees = torch.allclose(got, want, atol=1e-8)
            assert agrees == (tall_right or shape[0] <= shape[1]), (name, shape)


def test_svd_marks_its_matrix_as_taking_every_aspect_and_cholesky_does_not():
    class Both(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, s):
            return torch.linalg.svd(a)[1].sum() + torch.linalg.cholesky(s).sum()

    hints = {"a": Hint(), "s": Hint()}
    read_matrices(Both, hints)
    assert hints["a"].aspect and not hints["s"].aspect
    assert hints["s"].matrix == "spd"


def test_the_left_out_null_space_fails_on_a_tall_matrix_and_the_complete_one_passes(tmp_path):
    row = check_rows(tmp_path / "gram_complete.py", SOURCE.format(null_space=COMPLETE))["GramEig"]
    assert row["verdict"] == "pass", row["report"]["findings"]
    assert "tall matrix" in row["inputs"] and "square matrix" in row["inputs"]
    row = check_rows(tmp_path / "gram_left_out.py", SOURCE.format(null_space=LEFT_OUT))["GramEig"]
    assert row["verdict"] == "fail"
    mismatch = [f for f in row["report"]["findings"] if f["code"] == "gradient-mismatch"]
    assert mismatch and all("tall matrix" in f["message"] for f in mismatch), mismatch
