"""Zero-config linear-operator arguments (issue 18, corpus 4 part a: physics and solver
Functions take an object, ``op(x)`` in forward and ``op.adjoint(g)`` in backward, or
``physics.A``/``physics.A_adjoint`` handed to a solver; they got a float or a plain function
and were skipped). The stand-in's adjoint is its true transpose, so a backward that applies
the map where the adjoint belongs must still fail. Reduced cases, written here."""

import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery.operators import LinearStandIn
from gradsmith.discovery.synthesize import Synthesized, synthesize


def _project(wrong: bool):
    class Project(Function):
        """y[b, 0] = op(x[b, 0]) for a batch of one-channel images."""

        @staticmethod
        def forward(ctx, x, operator):
            ctx.operator = operator
            ctx.channels = x.shape[1]
            y = torch.zeros((x.shape[0], 1) + operator.out_shape, dtype=x.dtype)
            for i in range(x.shape[0]):
                y[i, 0] = operator(x[i, 0])
            return y

        @staticmethod
        def backward(ctx, g):
            operator = ctx.operator
            apply = operator if wrong else operator.adjoint
            gx = torch.zeros((g.shape[0], ctx.channels) + operator.in_shape, dtype=g.dtype)
            for i in range(g.shape[0]):
                gx[i, 0] = apply(g[i, 0])
            return gx, None

    return Project


def _matrix_of(op, n: int, name: str | None = None) -> torch.Tensor:
    """The matrix the stand-in applies to row vectors, read off the identity."""
    eye = torch.eye(n, dtype=torch.float64)
    return op(eye) if name is None else getattr(op, name)(eye)


def _found(fn) -> Synthesized:
    found = synthesize(fn)
    assert isinstance(found, Synthesized), found
    return found


def test_an_operator_and_its_adjoint_get_a_matrix_and_its_transpose_and_a_right_one_passes():
    right = _project(False)
    found = _found(right)
    x, op = found.args
    assert isinstance(op, LinearStandIn) and "linear operator stand-in" in found.description
    n = x.shape[-1]
    m = _matrix_of(op, n)
    torch.testing.assert_close(_matrix_of(op, n, "adjoint"), m.mT)
    assert not torch.allclose(m, m.mT)  # map and adjoint differ: swapping them is seen
    g = torch.randn((x.shape[0], 1) + op.out_shape, dtype=torch.float64)
    (got,) = torch.autograd.grad(right.apply(x, op), x, g)
    # reference: autograd of the same map written as a plain matrix product
    (reference,) = torch.autograd.grad((x[:, :1] @ m), x, g)
    torch.testing.assert_close(got, reference)
    report = gradsmith.check(right, *found.args)
    assert "gradient-mismatch" not in report.codes("error")


def test_a_backward_applying_the_map_instead_of_its_adjoint_fails():
    wrong = _project(True)
    found = _found(wrong)
    report = gradsmith.check(wrong, *found.args)
    assert not report.passed
    assert "gradient-mismatch" in report.codes("error")


def _regularised_solve(wrong: bool):
    class Solve(Function):
        """x = argmin |A x - y|^2 + |x - z|^2 / gamma, through physics.A / A_adjoint."""

        @staticmethod
        def forward(ctx, physics, y, z, gamma):
            n = y.shape[-1]
            eye = torch.eye(n, dtype=y.dtype)
            k = physics.A_adjoint_A(eye) + eye / gamma
            x = torch.linalg.solve(k, (physics.A_adjoint(y) + z / gamma).mT).mT
            ctx.save_for_backward(k)
            ctx.physics = physics
            ctx.gamma = gamma
            return x

        @staticmethod
        def backward(ctx, g):
            (k,) = ctx.saved_tensors
            physics = ctx.physics
            v = torch.linalg.solve(k, g.mT).mT
            gy = physics.A_adjoint(v) if wrong else physics.A(v)
            return None, gy, v / ctx.gamma, None

    return Solve


def test_a_solver_given_the_map_and_its_adjoint_by_name_passes_and_a_swap_fails():
    right, wrong = _regularised_solve(False), _regularised_solve(True)
    found = _found(right)
    physics, y, z, gamma = found.args
    assert isinstance(physics, LinearStandIn)
    n = y.shape[-1]
    m = _matrix_of(physics, n, "A")
    torch.testing.assert_close(_matrix_of(physics, n, "A_adjoint_A"), m @ m.mT)
    g = torch.randn_like(y)
    got = torch.autograd.grad(right.apply(physics, y, z, gamma), (y, z), g)
    # reference: autograd of the same normal equations written with the plain matrix
    k = m @ m.mT + torch.eye(n, dtype=torch.float64) / gamma
    reference = torch.autograd.grad(torch.linalg.solve(k, (y @ m.mT + z / gamma).mT).mT,
                                    (y, z), g)
    torch.testing.assert_close(got, reference)
    assert "gradient-mismatch" not in gradsmith.check(right, *found.args).codes("error")
    assert "gradient-mismatch" in gradsmith.check(wrong, *_found(wrong).args).codes("error")


def test_only_map_and_adjoint_names_pair_up():
    from gradsmith.discovery.operators import linear_operators

    class Uses(Function):
        @staticmethod
        def forward(ctx, x, op, cfg):
            ctx.op = op
            return op.mv(x) * cfg.relu(x) + cfg.elu(x) * cfg.start + cfg.star

        @staticmethod
        def backward(ctx, g):
            return ctx.op.rmv(g), None, None

    found = linear_operators(Uses, ["x", "op", "cfg"])
    assert list(found) == ["op"] and found["op"].maps == {"mv": "f", "rmv": "a"}
