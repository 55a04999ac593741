"""Zero-config inputs whose last dimension is a fixed size the code slices (issue 18, corpus 4
part a: Lie-group Functions take a quaternion (4), a rigid motion (7), a point (3) and slice
pieces off the last dimension; every generic layout failed, so they were skipped, or forward
ran at a size backward rejects and gave a false backward-error). Reduced cases, written here."""

import torch
from torch.autograd import Function
from torch.autograd.function import once_differentiable

import gradsmith
from gradsmith.discovery.synthesize import Synthesized, synthesize


def _parts(X):
    return X[..., :3], X[..., 3:]


def _rotate_like(wrong_point_grad: bool):
    class Act(Function):
        """cross(v, p) + w * p for X = (v, w), a vector and a scalar: X's last size is 4."""

        @staticmethod
        def forward(ctx, X, p):
            v, w = _parts(X)
            ctx.save_for_backward(X, p)
            return torch.linalg.cross(v, p, dim=-1) + w * p

        @staticmethod
        def backward(ctx, g):
            X, p = ctx.saved_tensors
            v, w = _parts(X)
            gv = torch.linalg.cross(p, g, dim=-1)
            gw = (g * p).sum(-1, keepdim=True)
            gp = w * g + (torch.linalg.cross(v, g, dim=-1) if wrong_point_grad else
                          torch.linalg.cross(g, v, dim=-1))
            return torch.cat((gv, gw), -1), gp

    return Act


class Pose(Function):
    """A translation (3) and a quaternion (4) packed in 7 values; the quaternion part goes
    through the 4-vector function above, so only a last size of 7 runs."""

    @staticmethod
    def forward(ctx, X):
        t, q = _parts(X)
        ctx.save_for_backward(X)
        return _rotate_like(False).apply(q, t)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (X,) = ctx.saved_tensors
        t, q = _parts(X)
        q, t = q.detach().requires_grad_(), t.detach().requires_grad_()
        with torch.enable_grad():
            gq, gt = torch.autograd.grad(_rotate_like(False).apply(q, t), (q, t), g)
        return torch.cat((gt, gq), -1)


def _reference(X, p):
    v, w = X[..., :3], X[..., 3:]
    return torch.linalg.cross(v, p, dim=-1) + w * p


def test_vectors_of_the_sizes_the_code_slices_are_synthesised_and_a_correct_one_passes():
    right = _rotate_like(False)
    found = synthesize(right)
    assert isinstance(found, Synthesized), found
    X, p = found.args
    assert X.shape[-1] == 4 and p.shape[-1] == 3
    assert "last dimension X 4, p 3" in found.description
    g = torch.randn_like(p)
    got = torch.autograd.grad(right.apply(X, p), (X, p), g)
    reference = torch.autograd.grad(_reference(X, p), (X, p), g)
    torch.testing.assert_close(got, reference)
    assert gradsmith.check(right, *found.args).passed


def test_a_wrong_backward_on_the_sized_inputs_still_fails():
    wrong = _rotate_like(True)
    found = synthesize(wrong)
    assert isinstance(found, Synthesized), found
    report = gradsmith.check(wrong, *found.args)
    assert not report.passed
    assert "gradient-mismatch" in report.codes("error")


def test_a_size_reached_through_a_nested_slice_is_found_and_variants_keep_it():
    found = synthesize(Pose)
    assert isinstance(found, Synthesized), found
    (X,) = found.args
    assert X.shape[-1] == 7
    assert all(v.args[0].shape[-1] == 7 for v in found.variants)
    g = torch.randn(X.shape[:-1] + (3,), dtype=torch.float64)
    (got,) = torch.autograd.grad(Pose.apply(X), X, g)
    (reference,) = torch.autograd.grad(_reference(X[..., 3:], X[..., :3]), X, g)
    torch.testing.assert_close(got, reference)
    assert gradsmith.check(Pose, *found.args).passed



def _three(v):
    assert v.shape[-1] == 3, "a 3-vector routine"
    return v


class Lift(Function):
    """(v, |v|^2) for a 3-vector v: forward runs on any last size, backward's 3-vector helper
    does not, and it slices the appended value off the gradient (g[..., :-1])."""

    @staticmethod
    def forward(ctx, v):
        ctx.save_for_backward(v)
        return torch.cat([v, (v * v).sum(-1, keepdim=True)], -1)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (v,) = ctx.saved_tensors
        return g[..., :-1] + 2 * _three(v) * g[..., -1:]


def test_variants_keep_the_last_size_the_code_slices():
    found = synthesize(Lift)
    assert isinstance(found, Synthesized), found
    (v,) = found.args
    assert v.shape[-1] == 3 and found.variants
    assert all(variant.args[0].shape[-1] == 3 for variant in found.variants)
    g = torch.randn(v.shape[:-1] + (4,), dtype=torch.float64)
    (got,) = torch.autograd.grad(Lift.apply(v), v, g)
    (reference,) = torch.autograd.grad(torch.cat([v, (v * v).sum(-1, keepdim=True)], -1), v, g)
    torch.testing.assert_close(got, reference)
    assert gradsmith.check(Lift, *found.args).passed
