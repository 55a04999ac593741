"""Shapes a Function's code states (discovery/stated.py) and the inputs built from them
(discovery/from_code.py), on plain-PyTorch Functions whose host code checks its inputs."""

import torch

from gradsmith.discovery import Synthesized, synthesize
from gradsmith.discovery.stated import read_statements


def _validate(_input, weight, target):
    if _input.ndim != 2 or weight.ndim != 2 or target.ndim != 1:
        raise ValueError("expected input[M,H], weight[V,H], and target[M]")
    if _input.shape[0] != target.shape[0] or _input.shape[1] != weight.shape[1]:
        raise ValueError("incompatible shapes")
    if target.dtype != torch.int64:
        raise TypeError("target must be an int64 tensor")


class LinearNll(torch.autograd.Function):
    """Shapes only in a helper's message, under the helper's own parameter names."""

    @staticmethod
    def forward(ctx, hidden, vocab, tokens, temperature):
        _validate(hidden, vocab, tokens)
        logp = torch.log_softmax(hidden @ vocab.T / temperature, -1)
        ctx.save_for_backward(hidden, vocab, tokens, logp)
        ctx.temperature = temperature
        return -logp.gather(1, tokens[:, None]).squeeze(1)

    @staticmethod
    def backward(ctx, g):
        hidden, vocab, tokens, logp = ctx.saved_tensors
        d = logp.exp()
        d[torch.arange(len(tokens)), tokens] -= 1
        d = d * g[:, None] / ctx.temperature
        return d @ vocab, d.T @ hidden, None, None


class Mix(torch.autograd.Function):
    """Comments on the parameters, an equality between dimensions, a flag the message names."""

    @staticmethod
    def forward(ctx,
                x,  # [..., HC, C]
                phi,  # [HC*C, M]
                alpha,  # scalar
                allow_wide: bool):
        assert allow_wide or x.dtype == torch.float16, "x must be float16 (set allow_wide=True)"
        HC = x.shape[-2]
        M = phi.shape[1]
        assert HC * HC == M, "M must be HC * HC"
        flat = x.reshape(-1, x.shape[-2] * x.shape[-1])
        ctx.save_for_backward(flat, phi, alpha)
        ctx.shape = x.shape
        return (flat @ phi) * alpha

    @staticmethod
    def backward(ctx, g):
        flat, phi, alpha = ctx.saved_tensors
        return ((g * alpha) @ phi.T).view(ctx.shape), flat.T @ (g * alpha), (g * (flat @ phi)).sum(), None


def test_statements_are_read_from_comments_docstrings_messages_and_host_code():
    said = read_statements(Mix, ["x", "phi", "alpha", "allow_wide"])
    assert said.shapes == {"x": ["...", "HC", "C"], "phi": ["HC*C", "M"], "alpha": []}
    assert said.equations["M"] == "HC * HC"
    said = read_statements(LinearNll, ["hidden", "vocab", "tokens", "temperature"])
    assert said.shapes == {"hidden": ["M", "H"], "vocab": ["V", "H"], "tokens": ["M"]}
    assert said.index_like == {"tokens"}


def test_inputs_follow_a_helpers_message_and_are_right():
    found = synthesize(LinearNll)
    assert isinstance(found, Synthesized), found.reason
    hidden, vocab, tokens, temperature = found.args
    assert tokens.dtype == torch.int64 and tokens.shape == hidden.shape[:1]
    assert vocab.shape[1] == hidden.shape[1] and int(tokens.max()) < vocab.shape[0]
    # the Function is right on them: autograd of the same expression agrees
    h, v = (t.detach().clone().requires_grad_() for t in (hidden, vocab))
    g = torch.randn(len(tokens), dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    torch.autograd.backward(LinearNll.apply(h, v, tokens, temperature), g)
    h2, v2 = (t.detach().clone().requires_grad_() for t in (hidden, vocab))
    want = torch.nn.functional.cross_entropy(h2 @ v2.T / temperature, tokens, reduction="none")
    want.backward(g)
    torch.testing.assert_close((h.grad, v.grad), (h2.grad, v2.grad))


def test_sizes_solve_equalities_and_a_named_fix_is_followed():
    found = synthesize(Mix)
    assert isinstance(found, Synthesized), found.reason
    x, phi, alpha, allow_wide = found.args
    assert allow_wide is True  # "set allow_wide=True" in the failing assert's message
    assert phi.shape == (x.shape[-2] * x.shape[-1], x.shape[-2] ** 2)
    assert alpha.shape == ()
