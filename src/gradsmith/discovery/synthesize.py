"""Build example inputs for a candidate that has none registered, by probing its signature.

What the forward's signature and body say comes first (:mod:`~gradsmith.discovery.hints`):
annotations, defaults, ``x.shape[2]``, ``x.view(-1, n)``, ``x @ w``, index tensors, string
modes, module arguments; and the contract the code is written for
(:mod:`~gradsmith.discovery.contract`): a hyperparameter forward stores on ctx or passes to
``float()`` is a Python float, a per-feature ``bias``/``weight`` whose gradient backward sums
is 1-D of the input's last dimension. Hyperparameters recognised by name (``dim``, ``stride``,
``clip_val``, ...) get a plain Python value; every other parameter gets a float64 tensor that requires grad. A
few shape layouts (same shape, matmul chain, linear, broadcast bias, conv1d, ...) are tried in
turn; the first whose forward runs wins. A function argument that forward only stores and
backward calls (``ctx.func(t, y)``, ``vjp(ctx.event_fn, (t, y))``) gets a plain
:class:`~gradsmith.discovery.callables.SyntheticFn`, and there the first layout (the ODE
convention, a scalar time before the state, first) and function flavour on which forward *and*
backward run wins: forward alone cannot tell whether invented functions fit.

One set of inputs hides bugs, so the winning set comes with **variants**, each kept only when
the forward runs on it: float hyperparameters at a non-default value (a backward that ignores
``beta`` is right at ``beta=1`` only), optional tensors both absent and present (``bias=None``
and a bias), and other shapes (sizes changed consistently, and a size-1 broadcast dimension).
A Function whose forward accepts nothing is reported as skipped, with a decorator that lists
every argument of its forward.

One module per concern: :mod:`~gradsmith.discovery.slots` plans each parameter's kind,
:mod:`~gradsmith.discovery.layouts` lists the shape layouts and
:mod:`~gradsmith.discovery.layout_search` tries them, :mod:`~gradsmith.discovery.build`
builds one argument list, :mod:`~gradsmith.discovery.probe` runs forward on it,
:mod:`~gradsmith.discovery.variants` finds the other input sets and
:mod:`~gradsmith.discovery.suggestion` phrases the fix when nothing runs.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gradsmith.discovery.asserted_types import asserted_classes, with_asserted
from gradsmith.discovery.backward_reads import backward_functions, no_gradient_positions
from gradsmith.discovery.builders import with_built
from gradsmith.discovery.callables import called_in_helpers, none_tested_in_helpers
from gradsmith.discovery.complex_matrices import complex_matrices
from gradsmith.discovery.contract import per_feature_params, scalar_params
from gradsmith.discovery.csr_operands import csr_inputs
from gradsmith.discovery.defaults import (
    passable,
    stated_defaults,
    with_defaults,
    with_none_defaults,
)
from gradsmith.discovery.domains import clamped_domains
from gradsmith.discovery.doubt import doubt
from gradsmith.discovery.dtypes import dtype_arguments, with_dtypes
from gradsmith.discovery.eigenpairs import eigenpairs, with_eigenpairs
from gradsmith.discovery.formula_domains import read_formula_domains
from gradsmith.discovery.from_code import inputs_from_code
from gradsmith.discovery.function_pairs import adjoint_pairs
from gradsmith.discovery.group_sizes import sized_inputs, slices_last_dim
from gradsmith.discovery.hints import forward_hints
from gradsmith.discovery.input_free import raising_inputs
from gradsmith.discovery.int_tuples import int_sequences, tupled_plans
from gradsmith.discovery.integer_kinds import read_integer_kinds
from gradsmith.discovery.integer_outputs import integer_output_inputs
from gradsmith.discovery.kernel_args import read_kernel_args
from gradsmith.discovery.layout_search import NoInputs, Synthesized, first_working, on_layout
from gradsmith.discovery.layouts import LAYOUTS
from gradsmith.discovery.lengths import read_fft_lengths
from gradsmith.discovery.low_precision import in_low_precision
from gradsmith.discovery.magnitudes import at_magnitude
from gradsmith.discovery.marginals import marginal_doubt, marginal_inputs
from gradsmith.discovery.matrix_maps import flagged_maps, matrix_givers
from gradsmith.discovery.module_settings import fill_settings
from gradsmith.discovery.none_required import numbered_plans
from gradsmith.discovery.operators import linear_operators, with_operators
from gradsmith.discovery.passed_on import passed_on
from gradsmith.discovery.placement import uncompiled_note, with_note
from gradsmith.discovery.probe import backward_error, complex_of_real, probe, tried
from gradsmith.discovery.process_group import (
    ASSUMED,
    backward_needs_group,
    needs_group,
    start_single_group,
)
from gradsmith.discovery.project_examples import through_examples
from gradsmith.discovery.repair import repair_plans, repaired_doubt
from gradsmith.discovery.repair_variants import flag_variants
from gradsmith.discovery.replans import (
    as_index,
    as_numbers,
    as_small_ints,
    as_tensors,
    with_contract,
)
from gradsmith.discovery.second_guess import with_second_guesses
from gradsmith.discovery.sentinels import equality_sentinels, with_sentinels
from gradsmith.discovery.shape_contracts import finished, read_contracts, with_contracts
from gradsmith.discovery.simplexes import read_simplexes
from gradsmith.discovery.slots import Slot, plan_slots, signature
from gradsmith.discovery.solvers import solver_skip
from gradsmith.discovery.sparse_layouts import layout_inputs
from gradsmith.discovery.sparse_triples import sparse_inputs
from gradsmith.discovery.stated_or import stated_or
from gradsmith.discovery.suggestion import no_inputs_reason
from gradsmith.discovery.through_callers import through_callers
from gradsmith.discovery.uses import argument_uses
from gradsmith.discovery.varargs import counted_by_backward, counted_by_guards, named_positions
from gradsmith.discovery.variants import Variant
from gradsmith.discovery.working_dir import in_home

__all__ = ["NoInputs", "Synthesized", "Variant", "synthesize"]


def synthesize(fn: Any, seed: int = 0) -> Synthesized | NoInputs:
    """Find positional inputs on which ``fn`` (a Function class or callable) runs forward.

    Args:
        fn: a ``torch.autograd.Function`` subclass or a callable of tensors.
        seed: seed of the random tensors.

    Returns:
        :class:`Synthesized` (with its variants) on success, :class:`NoInputs` with the reason
        and a decorator to add otherwise.

    Example:
        >>> import torch
        >>> found = synthesize(lambda x, dim: x.sum(dim))
        >>> found.description
        'x: float64 (3, 4), dim=-1'
        >>> [v.change for v in found.variants]
        ['other shapes: x (2, 5)', 'size-1 dimension: x (1, 4)', 'values 3 * randn: x']
    """
    settings = fill_settings(fn)  # global_args = None at import: the project's defaults
    found = _synthesize(fn, seed)
    if isinstance(found, NoInputs) and (moved := in_home(fn, found.reason)) is not None:
        found = moved(lambda: synthesize(fn, seed))  # forward opens a file next to its module
    if settings and isinstance(found, Synthesized):
        found = with_note(found, settings)
    # forward or backward calls torch.distributed and no group exists: a group of one, said
    if (isinstance(found, NoInputs) and needs_group(found.reason)
            or backward_needs_group(fn, found)) and start_single_group():
        found = _synthesize(fn, seed)
        if isinstance(found, Synthesized):
            found = with_note(found, ASSUMED)
    if isinstance(found, Synthesized):  # flat with zero backward near 0: a wavelength in nm
        found = at_magnitude(signature(fn)[0], found)
    if isinstance(fn, type) and (isinstance(found, NoInputs) or found.doubt):  # a skip:
        found = through_callers(fn, seed, found)  # the project's own callers know the inputs
    if isinstance(fn, type) and (isinstance(found, NoInputs) or found.doubt):
        found = through_examples(fn, seed, found)  # and its examples and tests
    if isinstance(fn, type) and isinstance(found, NoInputs) and (handed := passed_on(fn)):
        again = _synthesize(fn, seed, handed)  # forward hands `stochastic` to a helper whose
        if isinstance(again, Synthesized):  # default is rounding='deterministic'
            found = with_note(again, "; ".join(why for _, why in handed.values()))
    return found


def _synthesize(fn: Any, seed: int, handed: dict | None = None) -> Synthesized | NoInputs:
    call, params, target = signature(fn)
    if params is None:
        return NoInputs(no_inputs_reason(fn, "its forward signature cannot be inspected", [], {}))
    owner = fn if isinstance(fn, type) else None
    params = (named_positions(target, params) or counted_by_backward(owner, params)
              or counted_by_guards(target, params) or params)
    if (passed := passable(owner, params)) is not None:
        params = params[:passed]  # defaulted ones backward has no gradient slot for: not passed
    names = [p.name for p in params]
    hints = forward_hints(target, names, owner=owner)
    called = called_in_helpers(target, owner, names)
    for name in called:  # Owner.quadrature(f, ...): f(nodes)
        hints[name].kind = "module"
    tested = none_tested_in_helpers(target, owner, names) if called else set()  # hooks are called
    for name in tested & called:  # solve(b, hook)
        hints[name].optional = True  # a hook tested for None there: None first (slots)
    for name, bounds in clamped_domains(target, names).items():  # x = x.clamp(-1 + eps, ...)
        hints[name].domain = bounds
    read_formula_domains(target, owner, hints)  # acosh(x), 1 - |u|^2, eye(x.shape[1]), f[idx]
    read_simplexes(target, hints)  # multinomial(p), choice(n, p=p): a probability vector
    read_fft_lengths(target, owner, hints)  # rfft(y, n=n, axis=0): n also below y's length
    read_kernel_args(target, owner, hints)  # tl.load(t_ptr) == cols: a class index; ACT == 0
    contracts = read_contracts(target, owner, names, hints)  # grids, dims lists, shapes
    errors: list[str] = []  # forward's error on each float64 plan, as tried (see probe.tried)
    functions = backward_functions(owner, names)
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    frozen = {positional[i] for i in no_gradient_positions(owner) if i < len(positional)}
    read_integer_kinds(target, owner, hints, frozen)  # indices == n_idx, t < lengths: ints
    uses = argument_uses(target if owner is None else owner, names)
    plans = [plan_slots(params, hints, True, functions, uses),
             plan_slots(params, hints, False, functions, uses)]
    scalars = scalar_params(owner, hints, frozen)
    features = per_feature_params(owner, hints)
    plans = [with_contract(plan, scalars, features) for plan in plans]
    required = {p.name for p in params if p.default is p.empty} | set(handed or ())
    stated = {**stated_defaults(owner, names), **(handed or {})}
    if stated:  # `def svd(M, eps=1e-12): return SVD.apply(M, eps)`: the value users get
        plans = with_none_defaults([with_defaults(plan, stated, required) for plan in plans],
                                   stated, frozenset(frozen))
    operators = {**adjoint_pairs(owner, names), **linear_operators(owner, names),
                 **flagged_maps(owner, names), **matrix_givers(owner, names, frozen)}
    if operators:  # A(x) in forward, A.adjoint(g) in backward; fw(x) with its adjoint bw;
        # mm(x, transpose=True) with mm(g, transpose=False); a weight from dequantize()
        plans = [with_operators(plan, operators) for plan in plans]
    if kinds := dtype_arguments(target, names):  # torch.zeros(n, dtype=dtype, device=device)
        plans = [with_dtypes(plan, kinds, required) for plan in plans]
    compared = equality_sentinels(target, names)
    plans = [with_sentinels(plan, compared) for plan in plans] if compared else plans
    plans = with_contracts(plans, contracts)  # dims=[-1], cuts=[2], xshape=x.shape
    for plan in plans:
        for slot in plan:
            slot.frozen = slot.name in frozen
    plans = with_built(plans, owner)  # params.B, params.nc: the object the project builds
    if asserted := asserted_classes(target, names):  # assert isinstance(func, AdjModule)
        plans = with_asserted(plans, asserted)
    if (solver := solver_skip(fn, owner, params, plans[0], hints)) is not None:
        return NoInputs(solver)  # an argmin cannot be invented: the user's solver is needed
    flags = {s.name for s in plans[0] if s.kind == "value" and isinstance(s.value, bool)}
    paired = [p.name for p in params if "inverse" in p.name.lower() and p.name not in flags]
    if paired:  # an inverse must match its function: inventing one gives false failures
        return NoInputs(no_inputs_reason(fn, f"{paired[0]!r} must be the inverse of another argument, "
                             "which cannot be synthesised", plans[-1], hints))
    # Tensors the body checks for None (`if exists(mask)`) are tried absent first, then present.
    # float32 last: some forwards crash in float64 (the check then says so, in float32).
    # Fallbacks, tried only after the usual plans: parameters without a default that the
    # hyperparameter table named (`k`, `p`, `n`) as tensors (rotary q/k, distributions p/q),
    # then target-like tensors as class indices, then unnamed ints as 1 (slice bounds), then
    # tensors the code never uses as tensors as Python floats (`1. - lb_smooth`).
    plans += [p for p in (as_tensors(plan, required) for plan in list(plans)) if p]
    plans += [p for p in map(as_index, list(plans)) if p is not None]
    plans += [p for p in map(as_small_ints, list(plans)) if p is not None]
    plans += [p for p in map(as_numbers, list(plans)) if p is not None]
    plans = numbered_plans(plans, owner, target, names)  # assert bits is not None: a number
    if tupled := int_sequences(owner, target, names):  # input.shape[-len(block_shape):]
        plans += tupled_plans(plans, tupled)  # last: a Function that ran before is unchanged
    raising: tuple[Synthesized, list[Slot]] | None = None  # forward ran, backward raised
    given = {p.name for p in params if p.default is not p.empty}
    note = ""  # float32 because the kernels do not compile for float64: the Inputs column says
    for dtype in ("float64", "float32"):
        for slots in [p for i, p in enumerate(plans) if p not in plans[:i]]:
            found = first_working(call, slots, seed, dtype)
            if isinstance(found, Synthesized) and found.doubt:
                if dtype == "float64":
                    raising = raising or (found, slots)  # another plan may suit backward
                    continue
                found = replace(found, doubt=doubt(fn, found.doubt, slots, hints, given))
            if isinstance(found, Synthesized):
                found = finished(found, contracts, frozen)  # matrix_adjoint = matrix.mH
                found = with_eigenpairs(found, names, eigenpairs(owner, names), lambda a: (
                    probe(call, list(a)) is True and backward_error(call, a) is None))
                return with_second_guesses(found, stated_or(fn, params, hints, seed, with_note(
                    found, note if dtype == "float32" else "")), call, plans, slots, seed, dtype,
                                           given)
            errors += [found] if dtype == "float64" else []
            note = note or (uncompiled_note(found) if dtype == "float64" else "")
        if dtype == "float64" and slices_last_dim(owner) and (sized := sized_inputs(
                lambda s, lay: on_layout(call, s, lay, seed, "float64", backward=True), plans)):
            return sized  # before a layout backward rejects
        if raising is not None and (low := in_low_precision(call, raising, seed)) is not None:
            return low  # the code casts to bfloat16 and backward mixes it with float64
        if raising is not None:
            found, slots = raising
            if complex_of_real(found.doubt) and (made := complex_matrices(
                    found, owner, names, lambda a: probe(call, list(a)) is True
                    and backward_error(call, a) is None, seed)) is not None:
                return made  # linalg.eig written for complex normal (unitary) matrices
            if (fits := marginal_inputs(found, slots, lambda a: probe(call, list(a)) is True
                                        and backward_error(call, a) is None)) is not None:
                return fits  # mu (1, n, 1), nu (1, 1, k): marginals of C (b, n, k)
            said = doubt(fn, found.doubt, slots, hints, given) or marginal_doubt(
                fn, found.doubt, slots, hints, found.args)
            return with_second_guesses(found, stated_or(fn, params, hints, seed, replace(
                found, doubt=said)), call, plans, slots, seed, dtype, given)
    if (stated := inputs_from_code(fn, params, hints, seed)) is not None:
        return Synthesized(*stated, seed=seed)
    if (sparse := sparse_inputs(call, target, params, seed, plans[0])) is not None:
        return sparse  # torch.sparse_coo_tensor(indices, values, shape) of three parameters
    if (csr := csr_inputs(call, target, params, seed, plans[0])) is not None:
        return csr  # (A_shape, A_data, A_col_ind, A_rowptr): a matrix in CSR form
    if (layouted := layout_inputs(call, target, params, seed, plans[0])) is not None:
        return layouted  # A.ccol_indices(): A is a sparse CSC tensor
    if (fixed := repair_plans(call, plans, seed)) is not None:  # forward's error said how
        found, slots = fixed
        raised = backward_error(call, tuple(found.args))
        return Synthesized(tuple(found.args), ", ".join(found.parts), flag_variants(
            call, found.args, found.parts, {e.index for e in found.edits}), seed,
                           doubt=repaired_doubt(fn, raised, found, slots, hints) if raised else "")
    if (raising := raising_inputs(call, plans, seed)) is not None:  # torch.sqrt(2 * torch.pi)
        return Synthesized(*raising, seed=seed)  # the check reports forward's error: no input avoids it
    if (ints := integer_output_inputs(call, owner, plans, seed)) is not None:
        return ints  # `(x > 0).long()` with an STE backward: the check says backward never runs
    return NoInputs(no_inputs_reason(fn, f"{len(LAYOUTS)} input layouts failed ({tried(errors)})",
                         plans[0], hints))
