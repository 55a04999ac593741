"""Example inputs (and surrogates for estimators) for the real-code corpus's "with examples" run.

Our own file: it imports the projects' Functions from their checked-out sources (the folder in
``$GRADSMITH_REAL_CORPUS``, see ``benchmarks/real_corpus.py``) and registers inputs for them;
it copies none of their code. ``gradsmith check benchmarks/real_corpus_examples.py`` checks
every Function registered here. ``REFERENCES`` gives, per Function, the plain-PyTorch formula the
independent computation compares the Function's gradient with (the true gradient for exact
Functions, the surrogate's for estimators).
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

import gradsmith

ROOT = Path(os.environ.get("GRADSMITH_REAL_CORPUS", "/tmp/gradsmith-real-corpus"))
D = torch.float64


def _load(project: str, package_root: str, dotted: str):
    root = str(ROOT / project / package_root)
    if root not in sys.path:
        sys.path.insert(0, root)
    return importlib.import_module(dotted)


def _x(*shape, lo=None):
    g = torch.Generator().manual_seed(sum(shape) + len(shape))
    t = torch.randn(*shape, dtype=D, generator=g)
    if lo is not None:
        t = t.abs() + lo
    return t.requires_grad_()


def _offgrid(*shape, step=1.0):
    """Values away from the rounding/clamp points (so finite differences see no jump)."""
    g = torch.Generator().manual_seed(7)
    base = torch.randint(-3, 3, shape, generator=g).to(D) * step
    return (base + step * (0.15 + 0.7 * torch.rand(*shape, dtype=D, generator=g))
            ).requires_grad_()


def _load_file(project: str, relative: str, name: str):
    """A module by file path, without its package's __init__ (HAWQ's imports torchvision)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / project / relative)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _register(cls, make, surrogate=None, reference=None, name=None, intended=None):
    if intended is not None:
        gradsmith.example(make, intended=intended)(cls)
    else:
        gradsmith.example(make, surrogate=surrogate)(cls)
    REFERENCES[name or cls.__qualname__] = (cls, make, reference or surrogate)
    globals()[name or cls.__qualname__] = cls  # a top-level name: gradsmith check lists it
    return cls


REFERENCES: dict = {}

# -- entmax -----------------------------------------------------------------------------------
entmax_act = _load("deep-spin+entmax", "", "entmax.activations")
entmax_root = _load("deep-spin+entmax", "", "entmax.root_finding")
entmax_loss = _load("deep-spin+entmax", "", "entmax.losses")
_register(entmax_act.SparsemaxFunction, lambda: (_x(3, 5), -1))
_register(entmax_act.Entmax15Function, lambda: (_x(3, 5), -1))
_register(entmax_root.EntmaxBisectFunction, lambda: (_x(3, 5), 1.5, -1, 50, True))
_register(entmax_root.SparsemaxBisectFunction, lambda: (_x(3, 5), -1))
_register(entmax_root.NormmaxBisectFunction, lambda: (_x(3, 5), 2, -1, 50))
# the zero-config inputs (seed 0): rows whose solution is integral, where double backward is NaN
_register(entmax_root.BudgetBisectFunction, lambda: (
    torch.randn(3, 4, dtype=D, generator=torch.Generator().manual_seed(0)).requires_grad_(),
    2, -1, 50))
_target = torch.tensor([0, 2, 4])
_register(entmax_loss.SparsemaxLossFunction, lambda: (_x(3, 5), _target))
_register(entmax_loss.SparsemaxBisectLossFunction, lambda: (_x(3, 5), _target))
_register(entmax_loss.Entmax15LossFunction, lambda: (_x(3, 5), _target))
_register(entmax_loss.EntmaxBisectLossFunction, lambda: (_x(3, 5), _target, 1.5))
_register(entmax_loss.NormmaxBisectLossFunction, lambda: (_x(3, 5), _target, 2))

# -- brevitas: straight-through estimators -------------------------------------------------------
ste = _load("Xilinx+brevitas", "src", "brevitas.ops.autograd_ste_ops")
_identity = lambda x, *rest: x * 1  # noqa: E731 - the STE surrogate: gradient passes through
_register(ste.ScalarClampSteFn, lambda: (_x(4, 5), -0.5, 0.5),
          surrogate=lambda x, lo, hi: x * 1)
_register(ste.ScalarClampMinSteFn, lambda: (_x(4, 5), -0.5), surrogate=lambda x, lo: x * 1)
_register(ste.TensorClampSteFn,
          lambda: (_x(4, 5), torch.tensor(-0.5, dtype=D), torch.tensor(0.5, dtype=D)),
          surrogate=lambda x, lo, hi: x * 1)
_register(ste.InplaceTensorClampSteFn,
          lambda: (_x(4, 5), torch.tensor(-0.5, dtype=D), torch.tensor(0.5, dtype=D)),
          surrogate=lambda x, lo, hi: x * 1)
for _name in ("RoundToZeroSteFn", "DPURoundSteFn", "CeilSteFn", "FloorSteFn", "RoundSteFn"):
    _register(getattr(ste, _name), lambda: (_offgrid(4, 5),), surrogate=_identity)
for _name in ("BinarySignSteFn", "TernarySignSteFn"):
    _register(getattr(ste, _name), lambda: (_x(4, 5),), surrogate=_identity)
_register(ste.AbsBinarySignGradFn, lambda: (_x(4, 5),), reference=lambda x: x.abs())

# -- HAWQ ------------------------------------------------------------------------------------------
hawq = _load_file("Zhen-Dong+HAWQ", "utils/quantization_utils/quant_utils.py", "hawq_quant")
_register(hawq.ste_round, lambda: (_offgrid(4, 5),), surrogate=_identity)
_register(hawq.transfer_float_averaging_to_int_averaging, lambda: (_offgrid(4, 5),),
          surrogate=_identity)

# -- memcnn: modules and their parameters passed to apply ----------------------------------------
memcnn_add = _load("silvandeleemput+memcnn", "", "memcnn.models.additive")
memcnn_aff = _load("silvandeleemput+memcnn", "", "memcnn.models.affine")


def _coupling_args(affine=False):
    """A batch of 1: the case where forward's set_() on input chunks is seen by autograd."""
    torch.manual_seed(0)
    fm = torch.nn.Conv2d(2, 4 if affine else 2, 1).double()
    gm = torch.nn.Conv2d(2, 4 if affine else 2, 1).double()
    if affine:
        fm = _Split(fm)
        gm = _Split(gm)
    return (_x(1, 4, 3, 3), fm, gm, *fm.parameters(), *gm.parameters())


class _Split(torch.nn.Module):
    """An affine coupling's Fm: (log-scale, shift) from one conv."""

    def __init__(self, conv):
        super().__init__()
        self.conv = conv

    def forward(self, x):
        s, t = self.conv(x).chunk(2, dim=1)
        return torch.tanh(s), t


def _additive_reference(x, fm, gm, *weights):
    x1, x2 = x.chunk(2, dim=1)
    y1 = x1 + fm(x2)
    return torch.cat([y1, x2 + gm(y1)], dim=1)


def _additive_inverse_reference(y, fm, gm, *weights):
    y1, y2 = y.chunk(2, dim=1)
    x2 = y2 - gm(y1)
    return torch.cat([y1 - fm(x2), x2], dim=1)


_register(memcnn_add.AdditiveBlockFunction, lambda: _coupling_args(),
          reference=_additive_reference)
_register(memcnn_add.AdditiveBlockInverseFunction, lambda: _coupling_args(),
          reference=_additive_inverse_reference)


def _affine_reference(x, fm, gm, *weights):
    x1, x2 = x.chunk(2, dim=1)
    s1, t1 = fm(x2)
    y1 = x1 * s1 + t1
    s2, t2 = gm(y1)
    return torch.cat([y1, x2 * s2 + t2], dim=1)


_register(memcnn_aff.AffineBlockFunction, lambda: _coupling_args(affine=True),
          reference=_affine_reference)

# -- PACT ------------------------------------------------------------------------------------------
pact = _load("KwangHoonAn+PACT", "", "module")
_register(pact.ActFn, lambda: (_offgrid(4, 5, step=0.05) + 0.3, torch.tensor(1.0, dtype=D)
                               .requires_grad_(), 4),
          surrogate=lambda x, alpha, k: torch.minimum(torch.relu(x), alpha.reshape(())))
_register(pact.DoReFaQuant, lambda: (_x(4, 5), 4), surrogate=lambda r, k: r * 1)

# -- gradient reversal ----------------------------------------------------------------------------
dann = _load("fungtion+DANN", "", "models.functions")
_register(dann.ReverseLayerF, lambda: (_x(4, 5), 0.7),
          surrogate=lambda x, a: (-a) * x + (1 + a) * x.detach())
revgrad = _load("janfreyberg+pytorch-revgrad", "src", "pytorch_revgrad.functional")
_register(revgrad.RevGrad, lambda: (_x(4, 5), torch.tensor(0.7, dtype=D)),
          surrogate=lambda x, a: (-a.detach()) * x + (1 + a.detach()) * x.detach())

# -- EfficientNet ----------------------------------------------------------------------------------
effnet = _load("lukemelas+EfficientNet-PyTorch", "", "efficientnet_pytorch.utils")
_register(effnet.SwishImplementation, lambda: (_x(4, 5),), reference=lambda x: F.silu(x))

# -- memory-efficient attention (blockwise forward and backward in Python loops) -----------------
mea = _load("lucidrains+memory-efficient-attention-pytorch", "",
            "memory_efficient_attention_pytorch.flash_attention")
mea_cos = _load("lucidrains+memory-efficient-attention-pytorch", "",
                "memory_efficient_attention_pytorch.cosine_sim_flash_attention")


def _attention_reference(q, k, v, mask, causal, *rest):
    scores = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5
    if causal:
        n, m = scores.shape[-2:]
        scores = scores.masked_fill(torch.ones(n, m, dtype=torch.bool).triu(m - n + 1),
                                    float("-inf"))
    return scores.softmax(-1) @ v


def _cos_attention_reference(q, k, v, mask, scale, causal, *rest):
    scores = q @ k.transpose(-1, -2) * scale
    return scores.softmax(-1) @ v


_register(mea.FlashAttentionFunction,
          lambda: (_x(1, 2, 6, 4), _x(1, 2, 6, 4), _x(1, 2, 6, 4), None, False, 2, 3),
          reference=_attention_reference, name="FlashAttentionFunction")
def _unit(*shape):
    """Cosine-sim attention's contract: q and k are l2-normalised (|q.k| <= 1 bounds the
    logits, which forward uses instead of a running row max)."""
    return F.normalize(_x(*shape).detach(), dim=-1).requires_grad_()


_register(mea_cos.FlashAttentionFunction,
          lambda: (_unit(1, 2, 6, 4), _unit(1, 2, 6, 4), _x(1, 2, 6, 4), None, 2.0, False, 2, 3),
          reference=_cos_attention_reference, name="CosineSimFlashAttentionFunction")

# -- pytorch-struct -------------------------------------------------------------------------------
struct_sample = _load("harvardnlp+pytorch-struct", "", "torch_struct.semirings.sample")
struct_sparse = _load("harvardnlp+pytorch-struct", "", "torch_struct.semirings.sparse_max")
_register(struct_sparse._SimplexProject, lambda: (_x(3, 5), -1),
          reference=None)


def _sampled(logits, count):
    """The sampling semiring's draw, as read from its backward: one-hot multinomial samples."""
    n = logits.shape[-1]
    draws = torch.multinomial(logits.softmax(-1).view(-1, n), count, True)
    if count == 1:
        return F.one_hot(draws, n).view(*logits.shape).type_as(logits)
    return F.one_hot(draws.transpose(0, 1), n).view(count, *logits.shape).type_as(logits)


# intended modifications: backward returns a sample, the gradient of no function
_register(struct_sample._SampledLogSumExp, lambda: (_x(3, 5), -1),
          intended=lambda x, dim, g: (g.unsqueeze(-1) * _sampled(x.detach(), 1), None))
_register(struct_sparse._SparseMaxGrad,
          lambda: (struct_sparse.project_simplex(_x(3, 5).detach(), -1).requires_grad_(),
                   torch.tensor(-1)),
          intended=lambda w, dim, g: (struct_sparse.sparsemax_grad(g, w, -1), None))

# -- torchdiffeq ----------------------------------------------------------------------------------
tde_misc = _load("rtqichen+torchdiffeq", "", "torchdiffeq._impl.misc")
_register(tde_misc._StitchGradient, lambda: (_x(4, 5), _x(4, 5)),
          surrogate=lambda x1, out: x1 + (out - x1).detach())
tde_odeint = _load("rtqichen+torchdiffeq", "", "torchdiffeq._impl.odeint")


def _dynamics(t, y):
    return -0.5 * y + torch.sin(t)


def _event(t, y):  # the event c(t, y) = 0: the state's sum crosses t
    return y.sum() - t


def _event_terms(event_fn, func, t, y):
    """dc/dt, dc/dy and dy/dt = func at (t, y), without a graph (our own derivation)."""
    t, y = t.detach().requires_grad_(), y.detach().requires_grad_()
    with torch.enable_grad():
        dc_dt, dc_dy = torch.autograd.grad(event_fn(t, y), (t, y))
    velocity = func(t, y).detach()
    return dc_dt + (dc_dy * velocity).sum(), dc_dy, velocity


def _implicit_event_grad(func, event_fn, t, y, gt, gy):
    """The implicit function theorem at the event: t*(y) moves by -dc/dy / (dc/dt + dc/dy . f)
    per unit of y, and the final state with it along f."""
    rate, dc_dy, velocity = _event_terms(event_fn, func, t, y)
    return None, None, None, gy - dc_dy * (gt + (gy * velocity).sum()) / rate


def _implicit_event_reference(func, event_fn, t, y):
    """Outputs (t*, y*) linearised in y at the event, whose autograd gradient is the implicit
    one (the independent computation compares the first output's)."""
    rate, _, velocity = _event_terms(event_fn, func, t, y)
    moved = t.detach() - (event_fn(t.detach(), y) - event_fn(t.detach(), y.detach())) / rate
    return moved, y + velocity * (moved - t.detach())


_register(tde_odeint.ImplicitFnGradientRerouting,
          lambda: (_dynamics, _event, torch.tensor(0.3, dtype=D, requires_grad=True), _x(4)),
          intended=_implicit_event_grad, reference=_implicit_event_reference)

# -- binary networks ------------------------------------------------------------------------------
bnn = _load("1adrianb+binary-networks-pytorch", "", "bnn.ops")
_register(bnn.SignActivation, lambda: (_x(4, 5),),
          surrogate=lambda x: F.hardtanh(x))
_register(bnn.SignActivationStochastic, lambda: (_x(4, 5),),
          surrogate=lambda x: F.hardtanh(x))
