"""The plain-PyTorch helpers every repro script starts with (text, not imported code).

Kept as source text so each script is standalone: it imports the user's Function and torch,
nothing else. The helpers mirror what the checker does (float64 working copies, the same
seeded random state before every call, the same random output directions and step), so the
numbers a script prints are the numbers in the finding.
"""

PRELUDE = r'''
import importlib
import importlib.util
import math
import os
import random
import sys
import traceback

import torch
from torch.utils._pytree import keystr, tree_flatten, tree_flatten_with_path, tree_unflatten

SEED = {seed}
BACKWARD_SEED = SEED + 7919  # backward runs from its own replayed random state, as in gradsmith
H = 1e-6                 # central-difference step (float64)
ATOL, RTOL = 1e-5, 1e-3  # first-order tolerances: |analytic - numerical| <= ATOL + RTOL * scale


# this script's folder: the user's code and the larger tensors are found relative to it
HERE = os.path.dirname(os.path.abspath(globals().get("__file__", "repro.py")))


def _found(folders, inside):
    """The first of ``folders`` (relative ones taken from HERE) that holds ``inside``."""
    for folder in folders:
        folder = os.path.normpath(os.path.join(HERE, folder))
        if os.path.exists(os.path.join(folder, inside)):
            return folder
    return folders[-1]


def load():
    """The object under test, imported as gradsmith imported it."""
{loader}


FN = load()
APPLY = FN.apply if isinstance(FN, type) and issubclass(FN, torch.autograd.Function) else FN
BACKWARD_OF = FN if APPLY is not FN else None
PARAM_NAMES = {names!r}


SPARSE = dict()  # id of a sparse operand's values leaf -> how to rebuild the operand


def sparse_values(dense, layout):
    """A sparse operand as gradsmith checks it: its stored values are the leaf, and every
    call rebuilds the operand in its layout (``layout``) on the same pattern."""
    made = dense.to_sparse() if layout == "sparse_coo" else dense.to_sparse(layout=getattr(
        torch, layout))
    made = made.coalesce() if layout == "sparse_coo" else made
    values = made.values().detach().clone()
    SPARSE[id(values)] = lambda v: torch.sparse_coo_tensor(
        made.indices(), v, made.shape) if layout == "sparse_coo" else (
        torch.sparse_compressed_tensor(*([made.crow_indices(), made.col_indices()] if layout in (
            "sparse_csr", "sparse_bsr") else [made.ccol_indices(), made.row_indices()]), v,
            made.shape, layout=made.layout))
    return values


def make_args():
    """The exact inputs of the failing check."""
{make_args}


ARGS = make_args()
_FLAT, SPEC = tree_flatten_with_path(tuple(ARGS))
LEAVES = [leaf for _, leaf in _FLAT]
REBUILT = dict((i, SPARSE[id(leaf)]) for i, leaf in enumerate(LEAVES) if id(leaf) in SPARSE)
TENSORS = [i for i, v in enumerate(LEAVES) if isinstance(v, torch.Tensor)]
FLOATS = [i for i in TENSORS if LEAVES[i].is_floating_point()]
DIFF = [i for i in FLOATS if LEAVES[i].requires_grad] or FLOATS


def _label(path):
    head = path[0].idx if path else 0
    base = PARAM_NAMES[head] if head < len(PARAM_NAMES) else f"args[{{head}}]"
    return base + keystr(path[1:])


LABELS = [_label(_FLAT[i][0]) for i in DIFF]
# (module leaf, parameter name, tensor leaf): a tensor argument that IS a module argument's
# parameter; every call gives the module that argument's value, as gradsmith does
TIES = {ties!r}
DTYPE = torch.float64    # gradsmith checks on float64 copies
LAST_ARGS = None


def _with_parameters(module, values):
    """A copy of ``module`` (sharing its other parameters) with ``values`` as parameters."""
    import copy

    module = copy.deepcopy(module, dict((id(p), p) for p in module.parameters()))
    for name, value in values.items():
        owner, _, leaf = name.rpartition(".")
        (module.get_submodule(owner) if owner else module)._parameters[leaf] = value
    return module


def call(values, seed=SEED, others=None):
    """One forward on fresh copies of every tensor, ``values`` in the differentiable places,
    from the same random state each time."""
    global LAST_ARGS
    leaves = list(LEAVES)
    for i in TENSORS:
        t = leaves[i].detach()
        if others is not None and i in others:
            leaves[i] = others[i]
        elif t.is_floating_point() and DTYPE is not None:
            leaves[i] = t.to(DTYPE, copy=True)
        else:
            leaves[i] = t.clone()
    for i, v in zip(DIFF, values):
        leaves[i] = v
    for i, rebuild in REBUILT.items():
        leaves[i] = rebuild(leaves[i])
    for m in sorted(set(m for m, _, _ in TIES)):
        leaves[m] = _with_parameters(leaves[m], dict((n, leaves[t]) for k, n, t in TIES if k == m))
    args = tree_unflatten(leaves, SPEC)
    LAST_ARGS = args
    return seeded(seed, APPLY, *args)


def seeded(seed, fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` from the random state ``seed``: torch's CPU generator, Python's
    ``random`` and NumPy's global generator (when imported), as gradsmith replays them; the
    caller's states restored."""
    numpy = sys.modules.get("numpy")
    states = (torch.get_rng_state(), random.getstate(),
              numpy.random.get_state() if numpy is not None else None)
    torch.default_generator.manual_seed(seed)
    random.seed(seed)
    if numpy is not None:
        numpy.random.seed(seed % 2**32)
    try:
        return fn(*args, **kwargs)
    finally:
        torch.set_rng_state(states[0])
        random.setstate(states[1])
        if numpy is not None:
            numpy.random.set_state(states[2])


def flat_out(out):
    if isinstance(out, torch.Tensor):
        return [out]
    return [v if isinstance(v, torch.Tensor) else None for v in tree_flatten(out)[0]]


def base():
    return [LEAVES[i].detach().to(DTYPE or LEAVES[i].dtype, copy=True) for i in DIFF]


FORWARD_ERROR = None
# gradsmith's order: float64, then the inputs' own dtype, then float32 (every float input cast)
_user_dtypes = set(LEAVES[i].dtype for i in DIFF)
for DTYPE in [torch.float64] + ([None] if _user_dtypes != set([torch.float64]) else []) + [
        torch.float32]:
    try:
        _first = flat_out(call([x.requires_grad_(True) for x in base()]))
        FORWARD_ERROR = None
        break
    except Exception as exc:  # forward fails in every dtype: the body shows it
        FORWARD_ERROR, _first = exc, []
if FORWARD_ERROR is not None:
    DTYPE = torch.float64
OUT_POS = [k for k, o in enumerate(_first)
           if o is not None and o.is_floating_point() and o.requires_grad]
_low = [_first[k].dtype for k in OUT_POS if _first[k].dtype != torch.float64]
if FORWARD_ERROR is None and (DTYPE is None or _low):
    # gradsmith's low-precision step and tolerances, from the outputs' precision
    _eps = max(torch.finfo(_first[k].dtype).eps for k in OUT_POS)
    H, ATOL, RTOL = _eps ** (1 / 3) * 2, max(ATOL, 1e4 * _eps), max(RTOL, 1e5 * _eps)
    if DTYPE != torch.float64:
        print(f"forward fails in float64: replayed in "
              f"{{DTYPE or 'the dtype the inputs came in'}} (step {{H:.1g}})")
    else:
        print(f"outputs are {{_low[0]}} for float64 inputs: step {{H:.1g}}")
OUT_LABELS = ["out" if len(_first) == 1 else f"out[{{k}}]" for k in OUT_POS]


def outs(values, seed=SEED, others=None):
    flat = flat_out(call(values, seed, others))
    return [flat[k] for k in OUT_POS]


def first_order(xs):
    """The Function as a map from the differentiable inputs to the differentiable outputs."""
    return outs([x.clone() for x in xs])


def random_v(m, count, gen):
    """gradsmith's random output directions: +-1 scaled by a random factor in [0.5, 1.5]."""
    vs = []
    for _ in range(count):
        sign = torch.randint(0, 2, (m,), generator=gen, dtype=torch.int8).to(torch.float64) * 2 - 1
        vs.append(sign * (0.5 + torch.rand(m, generator=gen, dtype=torch.float64)))
    return vs


def index_str(flat, shape):
    if len(shape) == 0:
        return ""
    idx = []
    for size in reversed(shape):
        idx.append(flat % size)
        flat //= size
    return "[" + ", ".join(str(i) for i in reversed(idx)) + "]"


def compare(f, xs, labels, t, elements, seed_salt=1):
    """Analytic vs central-difference ``(J^T v)_j`` at input ``t``'s ``elements`` for the two
    random ``v`` gradsmith uses; prints each element and returns the mismatching ones."""
    leaves = [x.clone().requires_grad_(True) for x in xs]
    ys = f(leaves)
    shapes = [y.shape for y in ys]
    m = sum(y.numel() for y in ys)
    vs = random_v(m, 2, torch.Generator().manual_seed(SEED * 1000 + seed_salt))
    rows = []
    for v in vs:
        pieces, start = [], 0
        for y, s in zip(ys, shapes):
            pieces.append(v[start:start + s.numel()].reshape(s).to(y.dtype))
            start += s.numel()
        used = [(y, p) for y, p in zip(ys, pieces) if y.requires_grad]
        grads = seeded(BACKWARD_SEED, torch.autograd.grad, [y for y, _ in used], leaves,
                       [p for _, p in used], retain_graph=True, allow_unused=True) if used \
            else [None] * len(leaves)
        g = grads[t]
        rows.append(torch.zeros(xs[t].numel(), dtype=torch.float64) if g is None
                    else g.detach().reshape(-1).to(torch.float64))
    V = torch.stack(vs)
    A = torch.stack(rows)

    def value(zs):
        with torch.no_grad():
            return torch.cat([y.detach().reshape(-1).to(torch.float64) for y in f(zs)])

    bad = []
    x = xs[t]
    for j in elements:
        d = torch.zeros(x.numel(), dtype=x.dtype)
        d[j] = H
        d = d.reshape(x.shape)
        plus, minus = list(xs), list(xs)
        plus[t], minus[t] = x + d, x - d
        fp, fm = value(plus), value(minus)
        C = V @ (fp - fm) / (2 * H)
        S = V.abs() @ (fp - fm).abs() / (2 * H)
        a = A[:, j]
        tol = ATOL + RTOL * S
        k = int(((a - C).abs() / tol).nan_to_num(float("inf")).argmax())
        where = labels[t] + index_str(j, x.shape)
        wrong = bool(((a - C).abs() > tol).any()) or bool((~torch.isfinite(a)).any())
        finite = bool(torch.isfinite(C).all())
        said = REPORTED.get(j)
        print(f"  {{where}}: analytic {{float(a[k]):.6g}}, numerical {{float(C[k]):.6g}}"
              f"{{'   <- differs' if wrong and finite else ''}}"
              f"{{'' if said is None else f'   (gradsmith: {{said[0]:.6g}}, {{said[1]:.6g}})'}}"
              f"{{'' if finite else '   (numerical not finite: not compared)'}}")
        if wrong and finite:
            bad.append((j, float(a[k]), float(C[k])))
    return bad


def run_step(what, fn):
    """Run ``fn``; on an exception print it with the user's traceback and return it."""
    try:
        fn()
    except Exception as exc:  # the failure being reproduced
        print(f"{{what}} raised {{type(exc).__name__}}: {{exc}}")
        traceback.print_exc(limit=-3)
        return exc
    print(f"{{what}} ran without an error")
    return None


def verdict(reproduced, text):
    print(("REPRODUCED: " if reproduced else "NOT REPRODUCED: ") + text)
    sys.exit(0 if reproduced else 3)
'''
