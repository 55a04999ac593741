"""What each repro script does after the prelude, one body per family of findings (text).

A family is chosen from the finding code (:func:`family`); each body recomputes the quantity
the check compared, prints it, and ends with ``REPRODUCED`` (exit 0) or ``NOT REPRODUCED``
(exit 3).
"""

from __future__ import annotations

FAMILIES = {
    "gradient-mismatch": "first_order", "nan-gradient": "first_order",
    "double-backward-mismatch": "second_order", "nan-double-backward": "second_order",
    "double-backward-error": "second_order_crash",
    "forward-error": "forward_crash", "backward-error": "backward_crash",
    "wrong-grad-count": "structure", "non-tensor-grad": "structure",
    "grad-shape-mismatch": "structure", "grad-dtype-mismatch": "structure",
    "grad-device-mismatch": "structure",
    "input-mutated": "mutation", "grad-output-mutated": "mutation",
    "input-mutated-in-backward": "mutation", "saved-tensor-mutated": "mutation",
    "noncontiguous-mismatch": "noncontiguous", "nondeterministic-backward": "nondeterministic",
    "fresh-noise-in-backward": "nondeterministic",
    "jvp-mismatch": "jvp", "jvp-error": "jvp",
    "missing-param-grad": "module_param",
    "needs-input-grad-mismatch": "frozen",
}


def family(code: str, check: str = "") -> str:
    """The body that replays a finding (estimator codes of the gradients check included)."""
    if code in FAMILIES:
        return FAMILIES[code]
    if check == "gradients":
        return "first_order"
    if check == "second_order":
        return "second_order"
    return "generic"


BODIES = {
    "first_order": r'''
xs = base()
t = LABELS.index(INPUT) if INPUT in LABELS else 0
n = xs[t].numel()
elements = ELEMENTS or list(range(min(n, 64)))
print(f"first-order gradient of {FN_NAME} w.r.t. {LABELS[t]} (projected on gradsmith's random "
      f"grad_output, seed {SEED}):")
bad = compare(first_order, xs, LABELS, t, elements)
nan = [j for j in elements if j in NAN_ELEMENTS]
verdict(bool(bad) or bool(nan), f"{len(bad)} element(s) of {LABELS[t]} where backward disagrees "
        "with finite differences of forward" + (" (NaN gradient)" if nan else ""))
''',
    "second_order": r'''
xs = base()
k = len(xs)
_ys = first_order([x.clone().requires_grad_(True) for x in xs])
gen = torch.Generator().manual_seed(SEED * 1000 + 11)
gs = [torch.randn(y.shape, generator=gen, dtype=torch.float64).to(xs[0].dtype) for y in _ys]


def backward_map(inputs):
    """backward as a function of the inputs and the incoming gradient: J(x)^T g."""
    with torch.enable_grad():
        leaves = [x if x.requires_grad else x.detach().requires_grad_(True) for x in inputs[:k]]
        ys = outs([x.clone() for x in leaves])
        pairs = [(o, g) for o, g in zip(ys, inputs[k:]) if o.requires_grad]
        grads = seeded(BACKWARD_SEED, torch.autograd.grad, [o for o, _ in pairs], leaves,
                       [g.clone() for _, g in pairs], create_graph=True, allow_unused=True)
    return [torch.zeros_like(x) if g is None else g for g, x in zip(grads, leaves)]


labels = LABELS + [f"grad_{o}" for o in OUT_LABELS]
t = labels.index(INPUT) if INPUT in labels else 0
points = xs + gs
elements = ELEMENTS or list(range(min(points[t].numel(), 64)))
print(f"second order of {FN_NAME}: derivative of backward's result w.r.t. {labels[t]} "
      f"(projected on gradsmith's random directions, seed {SEED}):")
bad = compare(backward_map, points, labels, t, elements)
verdict(bool(bad), f"{len(bad)} element(s) where double backward disagrees with finite "
        "differences of backward (or is NaN)")
''',
    "second_order_crash": r'''
def backward_twice():
    xs = [x.requires_grad_(True) for x in base()]
    ys = first_order(xs)
    grads = torch.autograd.grad(ys, xs, [torch.ones_like(y) for y in ys], create_graph=True,
                                allow_unused=True)
    used = [g for g in grads if g is not None and g.requires_grad]
    torch.autograd.grad(used, xs, [torch.ones_like(g) for g in used], allow_unused=True)


exc = run_step("backward with create_graph=True, then double backward", backward_twice)
verdict(exc is not None, "differentiating backward raises")
''',
    "forward_crash": r'''
exc = FORWARD_ERROR or run_step("forward", lambda: call(base()))
if FORWARD_ERROR is not None:
    print(f"forward raised {type(exc).__name__}: {exc}")
verdict(exc is not None, "forward raises on these inputs")
''',
    "backward_crash": r'''
xs = [x.requires_grad_(True) for x in base()]
ys = first_order(xs)
exc = run_step("backward", lambda: torch.autograd.grad(
    [y for y in ys if y.requires_grad], xs, [torch.ones_like(y) for y in ys if y.requires_grad],
    allow_unused=True))
verdict(exc is not None, "backward raises on these inputs")
''',
    "structure": r'''
xs = [x.requires_grad_(True) for x in base()]
out = call([x.clone() for x in xs])
flat = [o for o in flat_out(out) if o is not None]
node = next(o.grad_fn for o in flat if o.grad_fn is not None)
incoming = [torch.ones_like(o) if o.is_floating_point() else torch.zeros_like(o, dtype=DTYPE)
            for o in flat]
if BACKWARD_OF is None:
    verdict(False, "not a Function class: backward cannot be called directly")
raw = BACKWARD_OF.backward(node, *incoming)
raw = raw if isinstance(raw, tuple) else (raw,)
args = LAST_ARGS
print(f"forward takes {len(args)} argument(s); backward returned {len(raw)} value(s)")
problems = []
if len(raw) != len(args):
    problems.append(f"{len(raw)} gradients for {len(args)} inputs")
for i, (a, g) in enumerate(zip(args, raw)):
    name = PARAM_NAMES[i] if i < len(PARAM_NAMES) else f"args[{i}]"
    if isinstance(a, torch.Tensor) and isinstance(g, torch.Tensor):
        print(f"  {name}: input {a.dtype} {tuple(a.shape)} {a.device}; gradient {g.dtype} "
              f"{tuple(g.shape)} {g.device}")
        if g.shape != a.shape or g.dtype != a.dtype or g.device != a.device:
            problems.append(f"{name}: gradient {g.dtype} {tuple(g.shape)} for input {a.dtype} "
                            f"{tuple(a.shape)}")
    else:
        print(f"  {name}: input {type(a).__name__}; gradient {type(g).__name__}")
        if g is not None and not isinstance(a, torch.Tensor):
            problems.append(f"{name}: a non-tensor input got {type(g).__name__}, expected None")
        if g is not None and not isinstance(g, torch.Tensor):
            problems.append(f"{name}: gradient is a {type(g).__name__}, not a tensor")
verdict(bool(problems), "; ".join(problems) or "backward's gradients match its inputs")
''',
    "mutation": r'''
xs = [x.requires_grad_(True) for x in base()]
clones = [x.clone() for x in xs]
versions = [x._version for x in clones]
saved = []


def pack(t):
    saved.append((t, t.detach().clone()))
    return t


with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
    out = call(clones)
args_before = [a.detach().clone() if isinstance(a, torch.Tensor) else None
               for a in tree_flatten(LAST_ARGS)[0]]
changed = [(i, float((a.detach() - b).abs().max())) for i, (a, b) in enumerate(
    zip(tree_flatten(LAST_ARGS)[0], args_before)) if b is not None and b.numel()]
ys = [flat_out(out)[k] for k in OUT_POS]
gen = torch.Generator().manual_seed(SEED * 1000 + 3)
gs = [torch.randn(y.shape, generator=gen, dtype=torch.float64).to(y.dtype) for y in ys]
gs_before = [g.clone() for g in gs]
torch.autograd.grad([y for y in ys if y.requires_grad], xs,
                    [g for y, g in zip(ys, gs) if y.requires_grad], allow_unused=True)
found = []
if CODE == "input-mutated":
    for x0, x1, v0 in zip(base(), clones, versions):
        diff = float((x1.detach() - x0).abs().max()) if x0.numel() else 0.0
        print(f"  input changed by forward: max |after - before| = {diff:.6g}; version "
              f"counter {v0} -> {x1._version} (it moves on every in-place operation, "
              "set_() included)")
        found += [diff] if diff > 0 or x1._version != v0 else []
elif CODE == "grad-output-mutated":
    for g0, g1 in zip(gs_before, gs):
        diff = float((g1 - g0).abs().max()) if g0.numel() else 0.0
        print(f"  grad_output changed by backward: max |after - before| = {diff:.6g}")
        found += [diff] if diff > 0 else []
elif CODE == "saved-tensor-mutated":
    for t, copy in saved:
        diff = float((t.detach() - copy).abs().max()) if copy.numel() else 0.0
        print(f"  saved tensor {tuple(copy.shape)} changed: max |after - before| = {diff:.6g}")
        found += [diff] if diff > 0 else []
else:  # input-mutated-in-backward
    after = [a.detach() for a in tree_flatten(LAST_ARGS)[0] if isinstance(a, torch.Tensor)]
    for a, b in zip(after, [b for b in args_before if b is not None]):
        diff = float((a - b).abs().max()) if b.numel() else 0.0
        print(f"  input changed by backward: max |after - before| = {diff:.6g}")
        found += [diff] if diff > 0 else []
verdict(bool(found), f"{CODE}: a tensor was modified in place")
''',
    "noncontiguous": r'''
xs = base()
_ys = first_order([x.clone().requires_grad_(True) for x in xs])
gen = torch.Generator().manual_seed(SEED * 1000 + 5)
gs = [torch.randn(y.shape, generator=gen, dtype=torch.float64).to(y.dtype) for y in _ys]
eps = torch.finfo(xs[0].dtype).eps
rtol, atol = 1e6 * eps, 1e5 * eps


def noncontiguous(t):
    if t.dim() == 0 or t.numel() == 0:
        return t.clone()
    if t.dim() >= 2:
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)
    return torch.stack([t, torch.zeros_like(t)], dim=-1).select(-1, 0)


def run(values, wrt, grads):
    ys = outs(values)
    pairs = [(o, g) for o, g in zip(ys, grads) if o.requires_grad]
    res = torch.autograd.grad([o for o, _ in pairs], wrt, [g for _, g in pairs],
                              allow_unused=True)
    return [o.detach() for o in ys], list(res)


leaves = [x.clone().requires_grad_(True) for x in xs]
ref_out, ref_grads = run([x.clone() for x in leaves], leaves, gs)
problems = []
# non-contiguous inputs (transposed copies for 2+ dims, strided for 1-D)
leaves2, views, unmaps = [], [], []
for x in xs:
    if x.dim() >= 2:
        leaf = x.transpose(-1, -2).contiguous().requires_grad_(True)
        views.append(leaf.clone().transpose(-1, -2))
        unmaps.append(lambda g: g.transpose(-1, -2))
    elif x.dim() == 1:
        leaf = torch.stack([x, torch.zeros_like(x)], dim=-1).requires_grad_(True)
        views.append(leaf.clone().select(-1, 0))
        unmaps.append(lambda g: g.select(-1, 0))
    else:
        leaf = x.clone().requires_grad_(True)
        views.append(leaf.clone())
        unmaps.append(lambda g: g)
    leaves2.append(leaf)
for what, thunk in (
        ("non-contiguous inputs", lambda: run(views, leaves2, gs)),
        ("non-contiguous grad_output", lambda: run([x.clone() for x in leaves], leaves,
                                                   [noncontiguous(g) for g in gs]))):
    try:
        out, grads = thunk()
    except Exception as exc:
        print(f"with {what}: raised {type(exc).__name__}: {exc}")
        problems.append(what)
        continue
    if what == "non-contiguous inputs":
        grads = [None if g is None else u(g) for g, u in zip(grads, unmaps)]
    for k, (a, b) in enumerate(zip(ref_out, out)):
        diff = float((a - b).abs().max()) if a.numel() else 0.0
        print(f"with {what}: output {OUT_LABELS[k]} max difference {diff:.3g}")
        if not torch.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True):
            problems.append(f"{what}: {OUT_LABELS[k]}")
    for label, a, b in zip(LABELS, ref_grads, grads):
        if a is None or b is None:
            continue
        diff = float((a - b).abs().max()) if a.numel() else 0.0
        print(f"with {what}: gradient of {label} max difference {diff:.3g}")
        if not torch.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True):
            problems.append(f"{what}: gradient of {label}")
verdict(bool(problems), "; ".join(problems) or "same results with non-contiguous tensors")
''',
    "nondeterministic": r'''
xs = base()
_ys = first_order([x.clone().requires_grad_(True) for x in xs])
gen = torch.Generator().manual_seed(SEED * 1000 + 5)
gs = [torch.randn(y.shape, generator=gen, dtype=torch.float64).to(y.dtype) for y in _ys]
results = []
for backward_seed in (SEED + 77, SEED + 78 if CODE == "fresh-noise-in-backward" else SEED + 77):
    leaves = [x.clone().requires_grad_(True) for x in xs]
    ys = outs([x.clone() for x in leaves])
    state = torch.get_rng_state()
    torch.default_generator.manual_seed(backward_seed)
    try:
        results.append(torch.autograd.grad([y for y in ys if y.requires_grad], leaves,
                                           [g for y, g in zip(ys, gs) if y.requires_grad],
                                           allow_unused=True))
    finally:
        torch.set_rng_state(state)
diffs = [float((a - b).abs().max()) for a, b in zip(*results)
         if a is not None and b is not None and a.numel()]
for label, d in zip(LABELS, diffs):
    print(f"two backward runs on the same forward: gradient of {label} max difference {d:.3g}")
verdict(any(d > 0 for d in diffs), "backward gives different gradients on identical runs")
''',
    "jvp": r'''
xs = base()
gen = torch.Generator().manual_seed(SEED * 1000 + 7)
tangents = [torch.randn(x.shape, generator=gen, dtype=x.dtype) for x in xs]
jvp_out = None


def forward_mode():
    global jvp_out
    with torch.autograd.forward_ad.dual_level():
        duals = [torch.autograd.forward_ad.make_dual(x, t) for x, t in zip(xs, tangents)]
        jvp_out = [torch.autograd.forward_ad.unpack_dual(y).tangent for y in outs(duals)]


exc = run_step("forward-mode AD (jvp)", forward_mode)
if exc is not None:
    verdict(True, "the forward-mode rule raises")
with torch.no_grad():
    plus = outs([x + H * t for x, t in zip(xs, tangents)])
    minus = outs([x - H * t for x, t in zip(xs, tangents)])
bad = []
for label, a, p, m in zip(OUT_LABELS, jvp_out, plus, minus):
    num = (p - m) / (2 * H)
    diff = float((a - num).abs().max()) if a is not None else float("nan")
    print(f"  {label}: jvp vs finite differences, max difference {diff:.6g}")
    if a is None or not torch.allclose(a, num, rtol=RTOL, atol=ATOL):
        bad.append(label)
verdict(bool(bad), f"jvp disagrees with finite differences for {', '.join(bad) or 'no output'}")
''',
    "module_param": r'''
# INPUT is "<argument>.<parameter>", e.g. "Fm.weight": a parameter of a module argument
owner, _, pname = INPUT.partition(".")
call([x.requires_grad_(True) for x in base()])
module = LAST_ARGS[PARAM_NAMES.index(owner)] if owner in PARAM_NAMES else None
if module is None:
    verdict(False, f"no module argument named {owner!r} among {PARAM_NAMES}")
param = module.get_parameter(pname)
param.requires_grad_(True)
ys = outs([x.requires_grad_(True) for x in base()], others=None)
g = [torch.ones_like(y) for y in ys]
(analytic,) = torch.autograd.grad(ys, [param], g, allow_unused=True)
numerical = []
with torch.no_grad():
    for j in range(min(param.numel(), 8)):
        flat = param.view(-1)
        old = float(flat[j])
        flat[j] = old + H
        plus = sum(float(y.sum()) for y in outs(base()))
        flat[j] = old - H
        minus = sum(float(y.sum()) for y in outs(base()))
        flat[j] = old
        numerical.append((plus - minus) / (2 * H))
print(f"gradient of sum(outputs) w.r.t. {INPUT}: autograd gives "
      f"{None if analytic is None else analytic.reshape(-1)[:8].tolist()}, finite "
      f"differences {numerical}")
depends = any(abs(v) > ATOL for v in numerical)
verdict(depends and (analytic is None or not torch.allclose(
    analytic.reshape(-1)[:len(numerical)].double(), torch.tensor(numerical, dtype=torch.float64),
    rtol=RTOL, atol=ATOL)), f"the output depends on {INPUT} but backward gives it "
    f"{'no gradient' if analytic is None else 'a different gradient'}")
''',
    "frozen": r'''
# needs-input-grad-mismatch: backward with one input frozen (requires_grad=False), the
# others trainable, against backward with every input trainable
xs = base()
t = LABELS.index(INPUT) if INPUT in LABELS else 0
_ys = first_order([x.clone().requires_grad_(True) for x in xs])
gen = torch.Generator().manual_seed(SEED * 1000 + 3)
gs = [torch.randn(y.shape, generator=gen, dtype=torch.float64).to(y.dtype) for y in _ys]


def grads(frozen):
    leaves = [x.clone().requires_grad_(k != frozen) for k, x in enumerate(xs)]
    ys = first_order(leaves)
    want = [leaf for k, leaf in enumerate(leaves) if k != frozen]
    got = list(seeded(BACKWARD_SEED, torch.autograd.grad, [y for y in ys if y.requires_grad],
                      want, [g for y, g in zip(ys, gs) if y.requires_grad], allow_unused=True))
    if frozen is not None:
        got.insert(frozen, None)
    return got


if EXCEPTION:
    print(f"{LABELS[t]} frozen (requires_grad=False), every other input trainable:")
    exc = run_step("forward and backward", lambda: grads(t))
    verdict(exc is not None, f"backward raises when {LABELS[t]} is frozen")
full = grads(None)
changed = []
for off in range(len(xs)):
    if off == t:
        continue
    try:
        part = grads(off)
    except Exception as exc:
        print(f"  {LABELS[off]} frozen: backward raised {type(exc).__name__}: {exc}")
        continue
    a, b = full[t], part[t]
    if b is None or not torch.allclose(a, b, rtol=1e-7, atol=1e-9):
        diff = "None" if b is None else f"max difference {float((a - b).abs().max()):.3g}"
        print(f"  {LABELS[off]} frozen: the gradient of {LABELS[t]} changes ({diff})")
        changed.append(LABELS[off])
    else:
        print(f"  {LABELS[off]} frozen: the gradient of {LABELS[t]} is unchanged")
verdict(bool(changed), f"the gradient of {LABELS[t]} depends on which inputs are frozen")
''',
    "generic": r'''
print(f"{CODE}: this family has no numeric replay; the finding was: {MESSAGE}")
exc = run_step("forward and backward", lambda: torch.autograd.grad(
    [y.sum() for y in first_order([x.requires_grad_(True) for x in base()])][0],
    [x.requires_grad_(True) for x in base()], allow_unused=True))
verdict(False, "run `gradsmith check` with -v for this finding; the inputs above are exact")
''',
}
