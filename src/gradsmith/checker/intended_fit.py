"""``intended=`` declarations fitted to a single-output backward that is the gradient of no
function: what it does to the incoming gradient, in closed form, per differentiable input.

The families real code uses (issue 18's third corpus), beside those of
:func:`gradsmith.checker.suggest.modifications` (clips, sign masks, centring):

- **pass-through** (``grad``): an input the forward returns unchanged, its gradient correct;
- **an added loss** (``torch.ones_like(y)``, ``c * torch.ones_like(y)``): an input the forward
  ignores whose backward is a constant whatever the incoming gradient (icefall's ``WithLoss``:
  ``y``'s sum is added to the objective);
- **an injected gradient** (``grad * g``, ``g`` a same-shaped argument): a dummy loss whose
  backward hands the input a gradient computed elsewhere (score distillation's
  ``SpecifyGradient``); or ``g`` itself (``-g``) whatever the incoming gradient: a constant
  0 loss whose backward returns the observed data as the adjoint source, so that
  backpropagating through a wave simulation migrates it (seistorch's
  ``ReverseTimeMigration``);
- **balancing** (``grad - grad.abs() * (a + b * ((x > 0).to(grad.dtype) - 0.5))``, ``a``
  and ``b`` same-shaped tensor arguments): a term proportional to the gradient's size that
  pushes the sign statistics of each element (icefall's activation balancers);
- **a sign flip outside a range** (``grad * torch.where(((grad > 0) & (x < lo)) | ((grad < 0)
  & (x > hi)), -1.0, 1.0)``, ``lo``/``hi`` forward arguments): a gradient that never pushes a
  parameter further out of ``[lo, hi]`` (icefall's ``LimitParamValue``);
- **a periodic exponential** (sinabs' multi-spike surrogate: an exponential bump of width
  ``w`` in each period ``theta`` of ``floor(x / theta)``);
- **Riemannian gradients** (:mod:`gradsmith.checker.riemannian`): a scale by the squared norm
  (the Poincare ball's), a projection onto a matrix group's tangent space (SU(n), Stiefel);
- **a bound's pass-through** (``grad * ((x >= b) | (grad < 0))``, and mirrored ``grad * ((x <=
  b) | (grad > 0))``, ``b`` a forward argument): ``max(x, b)`` whose gradient also passes
  where a descent step would move ``x`` back toward the bound (Balle et al. 2018's GDN
  parameter bound, CompressAI's ``LowerBoundFunction``);
- **guided** (``grad.clamp(min=0) * (x > 0)``): a ReLU whose backward keeps only positive
  incoming gradients (guided backpropagation, a saliency method);
- **feedback alignment** (``grad @ B`` for the input, ``grad.t() @ x`` for the weight, ``B`` a
  fixed matrix argument standing in for the weight: :mod:`gradsmith.checker.substituted`),
  with a linear layer's true gradients for its other inputs (``grad.sum(0)`` for a bias);
- **direct feedback alignment** (``e @ B`` whatever the incoming gradient, ``e`` an error
  signal and ``B`` fixed feedback weights, both arguments): an identity forward whose
  backward projects the output error to this layer (VDIB's ``HookFunction``, after Nokland
  2016 and Frenkel et al. 2021's direct random target projection);
- **blackbox differentiation** (``-(Fn.apply(w, lam) - Fn.apply(w + lam * grad, lam)) / lam``,
  Vlastelica et al. 2020): a piecewise-constant solver's backward that calls the solver again
  at inputs moved along the incoming gradient (also with the moved inputs clamped at 0, as a
  solver of non-negative weights needs).

Each input's term is chosen by evaluating the declaration against the gradient backward gave,
and where it names a forward number, again with that number moved
(:mod:`gradsmith.checker.moved_numbers`: ``p * ones_like(y)`` at ``p = 0.5`` for a backward
whose constant is 0.5 is luck); the whole line is then run against backward again with
another incoming gradient (a constant term must not depend on it), so what is printed as
checked has been run twice.

References:
    Vlastelica, Paulus, Musil, Martius, Rolinek: Differentiation of Blackbox Combinatorial
    Solvers, ICLR 2020. Springenberg et al.: Striving for Simplicity: The All Convolutional
    Net (guided backpropagation), ICLR 2015 workshop. Nickel, Kiela: Poincare Embeddings for
    Learning Hierarchical Representations, NeurIPS 2017. Nokland: Direct Feedback Alignment
    Provides Learning in Deep Neural Networks, NeurIPS 2016. Frenkel, Lefebvre, Bol: Learning
    Without Feedback: Fixed Random Learning Signals Allow for Feedforward Training of Deep
    Neural Networks, Frontiers in Neuroscience 2021.
"""

from __future__ import annotations

import torch

from gradsmith.checker import filled, riemannian, rng, rounded_grad, spread, suggest, surrogate_fit
from gradsmith.checker.session import Session


def declaration(session: Session, names: list[str], sigs: dict, v: torch.Tensor,
                grads: list[torch.Tensor]) -> str | None:
    """``intended=lambda ...`` reproducing backward for incoming gradients ``v`` and one more,
    or None. ``sigs``: the estimator signatures of the failing inputs (input -> signature)."""
    problem = session.problem
    split = problem.split(v)
    if len(split) != 1 or not sigs:
        return None
    subject = session.subject
    grad = suggest.grad_name(names)
    params = ", ".join(names + [grad])
    numbers = suggest.numbers(session, names)
    chosen: dict[int, str] = {}
    for t, g in enumerate(grads):
        top = subject.args.position(t)
        if top is None or subject.args.inputs[t].is_complex:
            return None
        if bool((g == 0).all()):
            continue  # None
        for body in _candidates(session, names, t, sigs.get(t), grad, numbers, g, split[0]):
            got = _evaluate(session, params, names, {top: body}, split)
            # a forward number it names must be read from (a clip at p equal to 1 at p = 1)
            if got is not None and suggest.matches(g, got[t], session) and suggest.moved_holds(
                    session, names, body, "intended", _compiled(params, names, {top: body},
                                                                session), split, [t]):
                chosen[top] = body
                break
        else:
            return None
    if not chosen or not any(subject.args.position(t) in chosen for t in sigs):
        return None
    source = f"lambda {params}: {suggest.returned(names, chosen)}"
    fn = suggest.compile_source(source, session)
    # run against backward for the check's incoming gradient and for a fresh one
    v2 = torch.randn(v.shape, generator=rng.generator(41), dtype=torch.float64).to(v.dtype)
    for w, want in ((v, grads), (v2, None)):
        if want is None:
            try:
                want = problem.vjp(w)
            except Exception:  # noqa: BLE001 - user code: unverified, so not suggested
                return None
        got = suggest.try_declaration(session, "intended", fn, problem.split(w))
        if got is None or not all(suggest.matches(a, b, session) for a, b in zip(want, got)):
            return None
    if not spread.holds(session, "intended", fn):  # and with the inputs spread over a grid
        return None
    return f"intended={source}"


def _candidates(session, names, t, sig, grad, numbers, g, piece) -> list[str]:
    """Terms for input ``t``'s gradient, most specific to its signature first."""
    subject = session.subject
    top = subject.args.position(t)
    name = names[top]
    x = session.problem.xs[t]
    out: list[str] = []
    same = piece.numel() == x.numel()
    kind = sig.kind if sig is not None else None
    if kind == "guided":
        out += [f"{grad}.clamp(min=0) * ({name} > 0)", f"{grad}.clamp(min=0) * ({name} >= 0)"]
    if kind in ("straight-through", "straight-through-saturating", "straight-through-rescaled"):
        if _ignored(session, top):  # an added loss; a flat forward's (round) is a slip
            out += _constant(name, g, numbers)
            # an injected gradient, likewise only into an input forward never reads; or the
            # argument itself whatever the incoming gradient (an adjoint source)
            same_shaped = _same_shaped(session, names, top, x)
            out += [f"{grad} * {b}" for b in same_shaped]
            out += [term for b in same_shaped for term in (b, f"-{b}")]
            # or the weight's own update, given to the copy that carries the gradient back in
            # its place (Kolen-Pollack feedback alignment: corpus 13b dev's LinearFAFunction)
            out += [term for i, a in enumerate(subject.args.values) if i != top and _matrix(a)
                    for term in _products(grad, names[i])]
        out += _blackbox(session, names, top, grad, numbers)
        out += _bound_passes(session, names, top, grad, numbers)
        out += _periodic_exponential(name, grad, numbers)
        if same:  # constants written outside a window (nni's ramp)
            out += filled.candidates(session, name, t, grad, numbers)
    if kind == "substituted" and sig.swap is not None:
        out += _products(grad, sig.swap[1])  # the stand-in, a forward argument's name
    if same:
        out.append(grad)
        if kind == "modified":
            out += _sign_flips(name, grad, numbers)
            out += suggest.modifications(session, names, x, grad)
            out += rounded_grad.candidates(grad, numbers)  # WAGE's fixed-point gradient
            out += _balancing(session, names, top, x, grad)
            out += riemannian.candidates(name, grad, x, g, piece, session)
            out += _projected(session, names, top, x)
    if kind is None and piece.dim() == 2:  # a correct input of a linear layer
        args = subject.args.values
        out += [term for i, a in enumerate(args) if i != top and _matrix(a)
                for term in _products(grad, names[i])] + [f"{grad}.sum(0)"]
    return out


def _balancing(session, names, top, x, grad) -> list[str]:
    """``grad - |grad| * (a + b * ([x > 0] - 0.5))``, ``a`` and ``b`` same-shaped tensor
    arguments (``a`` optional): a term proportional to the gradient's size that pushes each
    element's sign statistics (icefall's activation balancers)."""
    same = _same_shaped(session, names, top, x)
    sign = f"(({names[top]} > 0).to({grad}.dtype) - 0.5)"
    out = [f"{grad} - {grad}.abs() * {b} * {sign}" for b in same]
    out += [f"{grad} - {grad}.abs() * ({a} + {b} * {sign})" for a in same for b in same
            if a != b]
    return out


def _periodic_exponential(name: str, grad: str, numbers) -> list[str]:
    """Sinabs' periodic exponential surrogate of a multi-spike ``floor(x / theta)``: an
    exponential bump of width ``w`` in the middle of each spike period (``theta``, ``w``
    positive forward numbers)."""
    out = []
    for theta, a in numbers:
        for w, b in numbers:
            if theta != w and a > 0 and b > 0:
                u = (f"torch.where({name} >= {theta}, ({name} - {theta} / 2) % {theta}, "
                     f"{name} - {theta} / 2)")
                out.append(f"{grad} * torch.exp(-({u} - {theta} / 2).abs() / {w}) / {theta}")
    return out


def _bound_passes(session, names, top, grad, numbers) -> list[str]:
    """The gradient of ``max(x, b)`` (``min``) passed also where the incoming gradient's sign
    would move ``x`` toward the bound ``b``: a floating tensor argument or a forward number."""
    name = names[top]
    bounds = [names[i] for i, a in enumerate(session.subject.args.values)
              if i != top and isinstance(a, torch.Tensor) and a.is_floating_point()]
    bounds += [n for n, _ in numbers]
    return [f"{grad} * (({name} {cmp} {b}) | ({grad} {sign} 0))"
            for b in bounds for cmp, sign in ((">=", "<"), ("<=", ">"))]


def _same_shaped(session, names, top, x) -> list[str]:
    """Names of the floating tensor arguments shaped like ``x`` (``x`` itself left out)."""
    return [names[i] for i, a in enumerate(session.subject.args.values)
            if i != top and isinstance(a, torch.Tensor) and a.is_floating_point()
            and a.shape == x.shape]


def _projected(session, names, top, x) -> list[str]:
    """``e @ B`` (or ``e @ B.mT``), two other arguments, whatever the incoming gradient: an
    error signal projected through fixed feedback weights in place of the gradient (direct
    feedback alignment, DFA; direct random target projection: corpus 10b held-out VDIB's
    ``HookFunction``, spent), ``B`` flattened past its first dimension as such code does and
    the product viewed as ``x`` where only its size matches."""
    args = session.subject.args.values
    out = []
    for i, a in enumerate(args):
        if i == top or not _matrix(a):
            continue
        for j, b in enumerate(args):
            if j in (i, top) or not isinstance(b, torch.Tensor) or not b.is_floating_point():
                continue
            if b.dim() < 2:
                continue
            flat = b.reshape(b.shape[0], -1)
            for source, shape in ((f"{names[j]}.reshape({names[j]}.shape[0], -1)",
                                   (a.shape[0], flat.shape[1]) if a.shape[1] == flat.shape[0]
                                   else None),
                                  (f"{names[j]}.reshape({names[j]}.shape[0], -1).mT",
                                   (a.shape[0], flat.shape[0]) if a.shape[1] == flat.shape[1]
                                   else None)):
                if shape is None or shape[0] * shape[1] != x.numel():
                    continue
                if b.dim() == 2:
                    source = source.replace(f".reshape({names[j]}.shape[0], -1)", "")
                product = f"{names[i]} @ {source}"
                out.append(product if tuple(shape) == tuple(x.shape)
                           else f"({product}).view_as({names[top]})")
    return out


def _matrix(value) -> bool:
    return isinstance(value, torch.Tensor) and value.is_floating_point() and value.dim() == 2


def _products(grad: str, other: str) -> list[str]:
    """The gradients of a linear layer ``x @ W.T``: ``grad @ W`` for ``x`` and
    ``grad.t() @ x`` for ``W`` (and their transposed layouts)."""
    return [f"{grad} @ {other}", f"{grad}.t() @ {other}", f"{other}.t() @ {grad}",
            f"{grad} @ {other}.t()"]


def _ignored(session, top: int) -> bool:
    """Forward's outputs do not change at all when argument ``top`` moves (by 1, by -3.7, to
    ten times itself plus 0.5): an input only backward uses, as an added loss's. A
    piecewise-constant forward (round, floor) is flat only locally: a backward returning a
    constant there forgot the incoming gradient (``torch.ones_like(g)`` for ``g``)."""
    subject = session.subject
    base = subject.base()
    moves = (lambda a: a + 1.0, lambda a: a - 3.7, lambda a: a * 10 + 0.5)
    try:
        with torch.no_grad():
            ref = subject.select(subject.run_built(tuple(subject.build(
                [x.clone() for x in base]))))
            for move in moves:
                args = list(subject.build([x.clone() for x in base]))
                args[top] = move(args[top])
                got = subject.select(subject.run_built(tuple(args)))
                if not all(torch.equal(a, b) for a, b in zip(ref, got)):
                    return False
    except Exception:  # noqa: BLE001 - user code: not shown to be ignored
        return False
    return True


def _constant(name: str, g: torch.Tensor, numbers) -> list[str]:
    """``c * torch.ones_like(name)`` when backward gives every element the same value ``c``
    (an added loss: ``y.sum()`` has gradient 1)."""
    flat = g.reshape(-1).to(torch.float64)
    c = float(flat[0])
    if not bool((flat == c).all()) or c == 0:
        return []
    ones = f"torch.ones_like({name})"
    return [ones if e == "1" else f"{surrogate_fit._factor(e)} * {ones}"
            for e in surrogate_fit._expressions(c, numbers)]


def _sign_flips(name: str, grad: str, numbers) -> list[str]:
    """The gradient's sign flipped where it would push ``name`` further below ``lo`` or above
    ``hi`` (two forward numbers, ``lo <= hi``)."""
    out = []
    for i, (lo, a) in enumerate(numbers):
        for hi, b in numbers[i + 1:]:
            if a <= b:
                out.append(f"{grad} * torch.where((({grad} > 0) & ({name} < {lo})) | "
                           f"(({grad} < 0) & ({name} > {hi})), -1.0, 1.0)")
    return out


def _blackbox(session, names, top, grad, numbers) -> list[str]:
    """``-(F(w) - F(w'))/lam`` with ``w' = w + lam * grad`` (or clamped at 0), ``lam`` a
    positive forward number and ``F`` the Function itself, named as it is in its module."""
    cls = session.function_cls
    if cls is None or cls.__qualname__ != cls.__name__:
        return []  # a class no module-level name reaches: a printed line could not call it
    fn = cls.__name__
    out = []
    for lam, value in numbers:
        if value <= 0:
            continue
        for moved in (f"{names[top]} + {lam} * {grad}",
                      f"({names[top]} + {lam} * {grad}).clamp(min=0)"):
            args = ", ".join(moved if i == top else n for i, n in enumerate(names))
            out.append(f"-({fn}.apply({', '.join(names)}) - {fn}.apply({args})) / {lam}")
    return out


def _evaluate(session, params, names, chosen, split) -> list[torch.Tensor] | None:
    return suggest.try_declaration(session, "intended",
                                   _compiled(params, names, chosen, session), split)


def _compiled(params, names, chosen, session):
    return suggest.compile_source(f"lambda {params}: {suggest.returned(names, chosen)}",
                                  session)
