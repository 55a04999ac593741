"""Every finding code gradsmith check can report: its severity, the check that reports it, the
cause and the fix.

This table is the single source of truth: ``gradsmith check --explain CODE`` prints a row from
it (so a pip install, which has no docs/ folder, can say what a code means), and the table under
"Finding codes" in docs/check.md is generated from it (``python -m gradsmith.checker.code_docs
docs/check.md``; a test fails when the two differ).
"""

from __future__ import annotations

from typing import NamedTuple


class Code(NamedTuple):
    """One finding code.

    Attributes:
        severity: the severity it is reported with (see ``severity_note`` when it varies).
        check: the check that reports it (``"gradients"``, ``"compile"``, ...; several are
            comma-separated, ``"any"`` for any check).
        cause: what in the Function produces it.
        fix: what to change.
        severity_note: when the severity depends on the case, which other one and when.
    """

    severity: str
    check: str
    cause: str
    fix: str
    severity_note: str = ""


#: Codes the checker (``gradsmith.check``) reports, in the order docs/check.md lists them.
ROWS: dict[str, Code] = {
    "forward-error": Code(
        "error", "setup",
        "forward raised on the example inputs (known autograd errors explained)",
        "make the inputs valid for the Function, or fix forward"),
    "no-gradient-path": Code(
        "error", "setup",
        "no output is floating and attached to the graph (all detached / marked "
        "non-differentiable)",
        "return outputs computed from the inputs"),
    "integer-output-backward": Code(
        "error", "setup",
        "forward returns only integer tensors while backward returns a gradient: backward "
        "never runs and no gradient reaches the input",
        "return a floating tensor (e.g. `.to(x.dtype)`), or return None from backward",
        severity_note="warning when only a flag value synthesis chose gives integer "
                      "outputs and another value, where the row is checked, gives floats"),
    "nan-output": Code(
        "warning", "setup",
        "forward returns NaN/inf at the example inputs",
        "pick inputs inside the domain, or guard forward"),
    "float64-unsupported": Code(
        "info", "setup",
        "forward fails in float64; checked in the input dtype with scaled step and tolerances",
        "let forward follow its input dtype"),
    "low-precision-numerics": Code(
        "info", "setup",
        "outputs are lower precision than float64 inputs, or float64 holding values of a lower "
        "precision (kernels computing in float32 whatever they get); step/tolerances scaled to "
        "the precision computed in",
        "compute in the input dtype, or pass `reference=`"),
    "triton-interpreted": Code(
        "info", "setup",
        "Triton kernels ran in Triton's interpreter (no GPU): verdicts hold for the kernels' "
        "code, not for the GPU compiler's output",
        "check on a GPU too"),
    "user-warning": Code(
        "info", "setup",
        "user code emitted a warning during the check",
        "address or silence it deliberately"),
    "constant-input": Code(
        "info", "setup",
        "some floating inputs require grad and these do not, so they are held constant and their "
        "gradients are not checked (gradcheck's rule; with no input requiring grad, every "
        "floating input is checked)",
        "pass them with `requires_grad=True` to check them too"),
    "check-crashed": Code(
        "warning", "any",
        "a check could not run (likely a gradsmith limitation); what it verifies is unverified: "
        "the verdict is INCOMPLETE",
        "run the Function by hand; report a bug"),
    "check-incomplete": Code(
        "warning", "any",
        "a check that applies could not establish its property (a declaration it needs cannot be "
        "evaluated; the gradients check skipped for a declaration whose surrogate check did not "
        "run to the end): the verdict is INCOMPLETE",
        "fix what the reason names"),
    "not-exercised": Code(
        "warning", "gradients",
        "backward was never exercised: it returned 0 for every input and direction and finite "
        "differences agree (a constant forward, an empty quantizer window), or forward is NaN/inf "
        "next to every element; held on every input set, the verdict is INCOMPLETE",
        "give inputs where forward changes"),
    "uninitialised-output": Code(
        "warning", "setup",
        "forward returns memory it never wrote (torch.empty/new_empty/empty_like not filled: "
        "NaN under torch's fill_uninitialized_memory) on the given inputs: no value comparison "
        "means anything, the value checks are skipped and the verdict is INCOMPLETE",
        "check an empty-tensor helper on tensors with no elements; otherwise fill the output"),
    "forward-only": Code(
        "warning", "setup",
        "the Function defines no backward (nor vjp) by design: an ONNX `symbolic` with no "
        "backward, or a forward that saves nothing on ctx; differentiating it raises (loud, "
        "never silently wrong), so there is nothing to check and the verdict is INCOMPLETE. A "
        "misspelt backward or a forward saving for a missing one stays a backward-error",
        "define backward if gradients should flow; otherwise mark the outputs "
        "non-differentiable (ctx.mark_non_differentiable)"),
    "backward-error": Code(
        "error", "any",
        "backward raised; known autograd errors are explained (cause, user line, fix: see above)",
        "fix backward as the finding says"),
    "invented-input": Code(
        "warning", "any",
        "forward or backward raised on a line using an object zero-configuration inputs "
        "invented for an argument (an attribute it lacks, a number used as a shape): the "
        "invented object's error, not shown to be the Function's; later checks do not run and "
        "the verdict is INCOMPLETE",
        "register example inputs with a real object for that argument (@gradsmith.example)"),
    "unconfirmed-guess": Code(
        "warning", "gradients",
        "zero-config only: the first input set's only errors compare backward with forward "
        "(gradient-mismatch, backward-error, nan-gradient, double-backward-mismatch, "
        "grad-shape-mismatch), and an argument's kind or shape there was a guess (a callable, "
        "an object, a stand-in's shape attributes, an int, a secondary tensor's shape), or the "
        "inputs were synthesised where the project's own callers pass others to apply; on "
        "another candidate (for that argument, or the callers' inputs), where forward and "
        "backward run, the Function passes: the errors are kept as warnings and the verdict is "
        "INCOMPLETE. Where the errors hold on every other candidate, or none runs, they stay "
        "errors and say which arguments were guesses",
        "register an example with a real value for the argument named (@gradsmith.example)"),
    "broken-compile-cache": Code(
        "warning", "any",
        "forward or backward failed loading a compiled file from this machine's compile cache "
        "(Inductor, Triton, cpp_extension) that is truncated or unreadable, as a compile killed "
        "mid-write leaves it: the environment's failure, not shown to be the Function's; later "
        "checks do not run and the verdict is INCOMPLETE",
        "delete the file the finding names (it is rebuilt) or point TORCHINDUCTOR_CACHE_DIR / "
        "TRITON_CACHE_DIR at a fresh folder, then check again"),
    "unset-global": Code(
        "warning", "any",
        "forward or backward raised on a module global that is None at import and that the "
        "project's own setup (a training script) sets (`global_args[\"rec_grads\"]`): the "
        "setup's error, not shown to be the Function's; later checks do not run and the "
        "verdict is INCOMPLETE",
        "set the global before the check: a file that imports the module, sets it to the "
        "values a run uses and imports the Function, checked in its place"),
    "wrong-grad-count": Code(
        "error", "structure",
        "backward returned fewer values than forward has inputs (or extra non-None ones)",
        "one value per forward input, `None` for non-tensors"),
    "unanswered-default": Code(
        "warning", "structure",
        "forward takes optional parameters after those the checked call passes, and backward "
        "returns no gradient slot for them: a call that passes one raises; no call in the "
        "Function's module does (one that does is checked and ends in `wrong-grad-count`)",
        "return one value per forward parameter (`None` for the optional ones)"),
    "non-tensor-grad": Code(
        "error", "structure",
        "a gradient for a non-tensor argument",
        "return `None` at that position"),
    "grad-shape-mismatch": Code(
        "error", "structure",
        "gradient shape is neither the input's nor one the input broadcasts to (autograd rejects "
        "it)",
        "sum over broadcast dims, reshape"),
    "undefined-grad-error": Code(
        "error", "structure",
        "backward raises when an output is unused by the loss (receives `None` after "
        "`set_materialize_grads(False)`)",
        "`if grad is None:` skip its contribution"),
    "undefined-grad-mismatch": Code(
        "error", "structure",
        "with an output unused, the gradients differ from the full ones with zeros for it",
        "treat `None` exactly as zeros"),
    "fixed-size": Code(
        "warning", "structure",
        "zero-config only: on a further input set whose sizes gradsmith changed, backward "
        "raised a shape error naming a size the first set had in that dimension (a "
        "`view(-1, 4, 1)`): backward is written for that fixed size (a quaternion's 4, a 3 x 3 "
        "rotation) while forward accepted the other size silently; the first set's findings "
        "stand",
        "reject other sizes in forward (`if x.shape[-1] != 4: raise ValueError(...)`), or "
        "register an example"),
    "refused-option": Code(
        "info", "any",
        "zero-config only: on a further input set with an option changed from the first set's "
        "(a flag flipped from forward's default), forward or backward raised on a statement "
        "that states the value is unsupported: an `assert` (`assert ctx.reduce_bias`) or a "
        "`raise` under an `if` whose condition reads only options, directly or through ctx; "
        "the code's precondition, not demonstrated harm: that set is left out, the verdict "
        "comes from the others (on the first set the same error stays an error)",
        "nothing to fix; to have the value checked, support it, or reject it in forward"),
    "straight-through-option": Code(
        "warning", "gradients",
        "zero-config only: on a further input set with an option flipped from the first "
        "set's, forward is piecewise constant (a hard mode) while backward returns exactly the "
        "gradient it returns with the first set's options, which the first set verified (same "
        "inputs, random state and grad_output): a straight-through estimator the option "
        "selects, in place of an undeclared-estimator error; any other gradient keeps the error",
        "nothing to fix if the option is a straight-through mode; declare it to have it "
        "checked as an estimator"),
    "assumed-shape": Code(
        "warning", "structure",
        "zero-config only: a parameter's guessed shape got a gradient of another shape (a "
        "per-feature `bias` given the input's full shape, backward `g.sum(0)`); the set was "
        "checked again with the parameter in the gradient's shape, and that check's findings "
        "stand: the Function is written for that layout, and rejects the guessed one at run time",
        "`grad.sum_to_size(p.shape)` if other shapes are allowed, else register an example"),
    "broadcast-grad": Code(
        "warning", "structure",
        "gradient has the broadcast shape (`(3, 4)` for a `(4,)` input): legal, autograd sums it "
        "down, but backward materialises the larger tensor",
        "`grad.sum_to_size(x.shape)`"),
    "grad-dtype-mismatch": Code(
        "warning", "structure",
        "gradient dtype differs from the input's: autograd casts it silently, so a `.float()` in "
        "backward gives float64 users float32 precision and bfloat16 users float32 memory; a "
        "dtype and precision problem, not a wrong gradient (the gradients check and second order "
        "judge its values at the precision it returns)",
        "compute in `x.dtype`; `zeros_like`, no `.float()`",
        severity_note="error when not both real floating"),
    "grad-device-mismatch": Code(
        "error", "structure",
        "gradient on another device",
        "create tensors with `device=x.device`"),
    "input-mutated": Code(
        "error", "mutation",
        "forward modified an input without `ctx.mark_dirty`",
        "out-of-place ops, or `mark_dirty` and return it",
        severity_note="warning for inputs needing no grad"),
    "grad-output-mutated": Code(
        "error", "mutation",
        "backward wrote into `grad_output`",
        "build new tensors (`g * mask`, not `g[mask] = 0`)"),
    "input-mutated-in-backward": Code(
        "error", "mutation",
        "backward wrote into a forward input",
        "never write into inputs in backward"),
    "saved-tensor-mutated": Code(
        "error", "mutation",
        "backward wrote into a saved tensor (e.g. the user's output), or forward modified a "
        "tensor in place after an op saved it (`y = x.exp(); y += 1`)",
        "treat saved tensors as read-only; out-of-place ops"),
    "gradient-mismatch": Code(
        "error", "gradients",
        "backward disagrees with finite differences: which input, which elements, analytic vs "
        "numerical, the Jacobian entry, the probe ratio",
        "re-derive backward (chain rule, transposes, broadcast sums); look at the heatmap",
        severity_note="warning where forward approximates what backward differentiates"),
    "nan-gradient": Code(
        "error", "gradients",
        "backward is NaN/inf where forward is finite",
        "guard divisions/logs, `torch.where` on safe values"),
    "nan-gradient-at-scale": Code(
        "error", "robustness",
        "backward is NaN/inf at inputs of large magnitude (300 x the example's) where forward "
        "is finite: an intermediate overflows (exp(-x / a) in a surrogate, x**2 in a norm)",
        "compute backward in a stable form (sigmoid(z) * (1 - sigmoid(z)), torch.where)"),
    "backward-error-at-zero": Code(
        "error", "robustness",
        "backward raises a programming error (IndexError, TypeError, a shape error) at all-zero "
        "inputs, where forward runs and is finite: a branch for the zero case (a zero rotation, "
        "a zero-initialised parameter) random inputs never reach",
        "run backward by hand with zero inputs and fix that branch"),
    "inexact-iterations": Code(
        "warning", "gradients",
        "forward iterates a fixed number of times (an int argument bounds its loop) and stops "
        "before it converges: finite differences disagree with backward, the exact solution's "
        "gradient, by less at 4x the count and not at all at 16x, where the gradients were "
        "checked",
        "raise the iteration count where exact gradients matter, or iterate to a tolerance"),
    "kink": Code(
        "info", "gradients",
        "the input sits on a non-differentiable point and backward gives a valid subgradient",
        "nothing; move the example off the kink to check there"),
    "binary-domain": Code(
        "info", "gradients",
        "inputs the docstring's truth table gives as 0/1 values (spike logic gates): the "
        "gradient was checked at 0/1 inputs against the multilinear extension's, "
        "f(x_j = 1) - f(x_j = 0), instead of by finite differences at Gaussian inputs",
        "nothing; a backward wrong on 0/1 inputs still fails"),
    "nan-numerical": Code(
        "info", "gradients",
        "forward is NaN/inf next to some elements; not compared",
        "choose inputs inside the domain"),
    "symmetric-directions": Code(
        "info", "gradients",
        "a symmetric matrix input of which forward reads one triangle only (`eigh`, "
        "`eigvalsh`, `cholesky`): its gradient was compared along symmetric directions "
        "(E_ij + E_ji), the analytic gradient folded onto the read triangle",
        "nothing; a backward wrong along a symmetric direction still fails"),
    "eigenvector-directions": Code(
        "info", "gradients",
        "an eigenvector-matrix input beside its eigenvalues (the code rebuilds `V diag(l) "
        "V^H`): its gradient was compared along directions that keep it orthonormal (`V K`, "
        "`K` anti-symmetric), the tangent-space gradient its backward is written for",
        "nothing; a backward wrong along such a direction still fails"),
    "gauge-aligned": Code(
        "info", "gradients",
        "an output with orthonormal columns or rows (singular or eigen vectors, each defined "
        "up to a sign or phase): finite differences and backward were compared with each "
        "vector's sign/phase aligned to the base point's",
        "nothing; a backward wrong along any direction but a vector's own phase still fails"),
    "missing-param-grad": Code(
        "error", "gradients",
        "the parameters of a module argument get no gradient (the checkpointing pattern with "
        "`torch.autograd.grad` on the inputs only), although the output depends on them",
        "recompute under `enable_grad` and `torch.autograd.backward(outputs, grad_outputs)`"),
    "undeclared-estimator": Code(
        "error", "gradients",
        "backward is not the forward's gradient and has an estimator's signature "
        "(straight-through, straight-through clamp, gradient reversal or scaling, an identity "
        "forward's modified gradient, guided backpropagation, feedback alignment, a derivative "
        "rounded to a grid, a sampled or random backward): what it looks like and the "
        'declaration line for this Function (`details["declaration"]`, `details["verified"]`)',
        "declare it (`surrogate=` / `intended=` / `unbiased=True`), or fix backward if it is not "
        "intended"),
    "biased-estimate": Code(
        "error", "gradients, surrogate",
        "declared `unbiased=True`, the mean of backward's random draws is not the gradient (how "
        "many standard errors off, the worst element's mean and expected value)",
        "make each draw unbiased, or declare the draws with `intended=` (draw for draw)"),
    "reference-mismatch": Code(
        "error", "reference",
        "an output or gradient differs from the reference's float64 autograd by more than 8x the "
        "reference's own error at the Function's precision",
        "fix forward/backward (or the reference)"),
    "reference-error": Code(
        "error", "reference",
        "`reference=` could not be compared: it raised, or returns other outputs than the "
        "Function",
        "give plain PyTorch with the Function's signature and outputs"),
    "surrogate-mismatch": Code(
        "error", "surrogate",
        "backward differs from the surrogate's autograd gradient",
        "implement the surrogate's derivative, or fix the surrogate"),
    "estimator-ignores-shift": Code(
        "error", "surrogate",
        "a declared estimator's backward ignores a number that shifts forward's step (moving "
        "the input and it together leaves forward unchanged, while backward's gradient moves: "
        "a window left at 0 when the step sits at an offset or threshold)",
        "compute backward's window from the input minus that number (or fix the declaration)"),
    "surrogate-error": Code(
        "error", "surrogate",
        "the surrogate raised or returned differently shaped outputs",
        "same signature and output shapes as the Function"),
    "intended-mismatch": Code(
        "error", "surrogate",
        "backward differs from what the `intended=` function returns",
        "make backward return it (same random state for noise), or fix the declaration"),
    "intended-error": Code(
        "error", "surrogate",
        "the `intended=` function raised, or returned a wrong count or shape",
        "one value per forward argument, like backward"),
    "gradient-quality": Code(
        "info", "approximate",
        "relative error, cosine similarity, band and verdict per input",
        "fix sign/scale/transposition first, then accuracy; or loosen the thresholds",
        severity_note="error above `max_relative_error` or below `min_cosine`"),
    "double-backward-unsupported": Code(
        "warning", "second_order",
        "first order verified, but autograd does not see all of backward's dependence on some "
        "inputs (values computed in forward and saved, `.detach()`, numpy, a compiled "
        "extension or Triton kernel) and backward is not `@once_differentiable`: double "
        "backward silently returns 0 for inputs it sees none of (details \"zero\") and only "
        "part of the second derivative for inputs it sees some of (\"partial\", e.g. swish "
        "saving sigmoid(x)); one finding per Function naming both. Harms only code that "
        "differentiates twice (gradient penalties, MAML, Hessian-vector products)",
        "`@once_differentiable` on backward (double backward then raises), or recompute from "
        "saved inputs with differentiable torch ops",
        severity_note="error with `--require second-order` or `require = [\"second-order\"]`"),
    "double-backward-mismatch": Code(
        "error", "second_order",
        "the second-order comparison's per-input disagreement; after verified first order it "
        "always means autograd misses part of backward's dependence, so it is reported folded "
        "into `double-backward-unsupported` (kept for repro scripts and `--explain`)",
        "see `double-backward-unsupported`"),
    "nan-double-backward": Code(
        "warning", "second_order",
        "second derivatives NaN/inf (first order verified: harms only code that "
        "differentiates twice)",
        "guard the backward's own divisions",
        severity_note="error with `--require second-order` or `require = [\"second-order\"]`"),
    "second-order-probed": Code(
        "info", "second_order",
        "one evaluation of backward with its graph was so slow that comparing second order "
        "element by element would take more than a few seconds: every input was compared "
        "along random directions instead (a wrong second derivative moves them), with the "
        "measured cost in details",
        "a note: for an element-by-element comparison, check on smaller inputs"),
    "double-backward-error": Code(
        "warning", "second_order",
        "differentiating backward raised (first order verified: harms only code that "
        "differentiates twice)",
        "differentiable backward or `@once_differentiable`",
        severity_note="error with `--require second-order` or `require = [\"second-order\"]`"),
    "jvp-mismatch": Code(
        "error", "forward_ad",
        "`jvp` tangents differ from `J u`",
        "`tangent_out = J @ tangent_in`"),
    "jvp-error": Code(
        "error", "forward_ad",
        "forward-mode AD raised (e.g. a `jvp` that returns `None`)",
        "return one tangent per output; `ctx.save_for_forward`"),
    "vmap-mismatch": Code(
        "error", "vmap",
        "vmapped forward or per-sample gradient differs from a loop",
        "fix the vmap rule (`out_dims`, batch dim)"),
    "vmap-error": Code(
        "error", "vmap",
        "a Function that opts in to vmap (`vmap` staticmethod or `generate_vmap_rule = True`, "
        "named in the message) raised under it (`.item()`, numpy, a per-sample reshape of a "
        "batched tensor); one that does not opt in gets `vmap-no-rule` instead",
        "write a vmap staticmethod or drop the opt-in"),
    "vmap-no-rule": Code(
        "warning", "vmap",
        "a `setup_context`-style Function with neither a `vmap` staticmethod nor "
        "`generate_vmap_rule = True`: it does not support vmap (torch refuses it by design, and "
        "per-sample gradients with it); the hint says how to add it and whether "
        "`generate_vmap_rule = True` was verified to work",
        "`generate_vmap_rule = True`, or a `vmap` staticmethod"),
    "noncontiguous-mismatch": Code(
        "error", "robustness",
        "results change (or it raises) with non-contiguous inputs or `grad_output`",
        "`.reshape`/`.contiguous()`, no stride assumptions",
        severity_note="warning when forward itself raises on a non-contiguous input: loud, "
        "at the caller's own call"),
    "nondeterministic-backward": Code(
        "error", "robustness",
        "two identical runs give different gradients",
        "no state on ctx/globals changing between calls",
        severity_note="warning when they differ in their last bits only: summation order"),
    "random-forward": Code(
        "info", "randomness",
        "forward draws random numbers; replayed for the comparison",
        "make sure backward reuses the noise"),
    "nondeterministic-forward": Code(
        "warning", "randomness",
        "forward differs for the same inputs and RNG state",
        "forward must depend only on inputs and torch RNG"),
    "fresh-noise-in-backward": Code(
        "error", "randomness",
        "backward depends on the RNG state at backward time",
        "save the mask/noise in forward"),
    "random-backward": Code(
        "info", "randomness",
        "backward draws noise at backward time, as the declared `intended=` gradient does "
        "(compared draw for draw) or as `unbiased=True` declares (judged on average)",
        "nothing"),
    "tensor-on-ctx": Code(
        "warning", "hygiene",
        "a tensor stored as a ctx attribute",
        "`ctx.save_for_backward`"),
    "ctx-leak": Code(
        "warning", "hygiene",
        "ctx survives deletion of outputs + gc",
        "do not keep ctx/outputs in globals, closures, caches"),
    "needs-input-grad-mismatch": Code(
        "error", "hygiene",
        "switching one input's `requires_grad` off changes (or drops, or crashes) another input's "
        "gradient: a wrong `ctx.needs_input_grad` index",
        "index `needs_input_grad` by the position of the gradient it guards"),
    "unneeded-grad": Code(
        "info", "hygiene",
        "gradient computed for an input that does not need one: a frozen input as passed "
        '(`details["frozen"]`), or an input switched off in turn (not reported when it is '
        "`grad_output` itself or the same tensor as another returned gradient: no work wasted)",
        "guard with `ctx.needs_input_grad[i]`"),
    "float64-crash": Code(
        "warning", "setup",
        "forward or backward crashes in float64 although the inputs are float64 (or backward "
        "only): float32 internals; checked in float32 instead",
        "create internal tensors with the input's dtype"),
    "float32-contract": Code(
        "warning", "setup",
        "float64 inputs give float32 outputs that are non-finite, or far (over 1e-3 relative) "
        "from those of the same values in float32, where float32 gives finite ones (a library "
        "handed the tensor's memory reads it as float32): float64 is outside the contract; "
        "checked in float32 instead",
        "nothing to fix if float32 is the contract; convert float64 inputs (`x.float()`) "
        "before handing their memory on, or reject them in forward"),
    "gap-not-observed": Code(
        "info", "setup",
        "a gap is declared in `gaps=` but that column found nothing",
        "remove it from `gaps=`"),
    "precision-loss": Code(
        "error", "precision",
        "float32 (or the user's low precision) result more than 10x JAX's tolerance from float64 "
        "at the same inputs",
        "stable formula (expm1/log1p, subtract the mean first), or compute that step in higher "
        "precision"),
    "precision-degraded": Code(
        "warning", "precision",
        "beyond JAX's tolerance but within 10x",
        "accumulate in higher precision"),
    "precision-error": Code(
        "warning", "precision",
        "raises in float32 although it runs in float64",
        "no hard-coded dtypes"),
    "compile-graph-break": Code(
        "warning", "compile",
        "`fullgraph=True` fails on a graph break: Dynamo's reason and the user line",
        "tensor operations instead of `.item()`, Python branches on tensors, logging/print"),
    "compile-error": Code(
        "warning", "compile",
        "`torch.compile` raises (not a graph break)",
        "see Dynamo's message"),
    "compile-mismatch": Code(
        "error", "compile",
        "compiled outputs or gradients differ from eager",
        "no Python state / `is_compiling()` paths; no in-place `mark_dirty` under compile"),
    "compile-unsupported-by-torch": Code(
        "info", "compile",
        "Dynamo cannot trace this kind of Function (custom `jvp`/`vjp`)",
        "nothing; it runs eagerly between graphs"),
    "export-error": Code(
        "warning", "export",
        "`torch.export` fails (data-dependent branches, NumPy)",
        "`torch.cond`/`torch._check`, or a custom op with a fake kernel"),
    "export-mismatch": Code(
        "error", "export",
        "the exported program computes other outputs",
        "keep forward a function of its tensor inputs"),
    "export-drops-backward": Code(
        "warning", "export",
        "the exported program trains with the traced forward's gradient (zero for `sign`), or "
        "cannot be differentiated",
        "`torch.library.custom_op` + `register_autograd`; nothing for inference-only export"),
    "onnx-export-error": Code(
        "warning", "onnx",
        "`torch.onnx.export` (the exporter named) or ONNX Runtime raises: the first line of its "
        "error",
        "torch operations the exporter knows; no NumPy or data-dependent Python control flow"),
    "onnx-mismatch": Code(
        "error", "onnx",
        "the ONNX model's outputs differ from eager; \"baked a value\" when it agrees on the "
        "example inputs but not on a second draw (a `.item()` read became a constant, its input "
        "dropped)",
        "keep forward a function of its tensor inputs (torch ops, `torch.where`, no `.item()`)"),
    "autocast-error": Code(
        "warning", "autocast",
        "forward or backward raises under autocast (mixed dtypes)",
        "`custom_fwd`/`custom_bwd` (verified when the hint says so), or cast in backward"),
    "autocast-inaccurate": Code(
        "warning", "autocast",
        "results beyond 1e-1 (bfloat16) / 1e-2 (float16) of float32 (JAX's gradient tolerances)",
        "keep sensitive steps in float32 (`custom_fwd(cast_inputs=torch.float32)`)"),
    "autocast-grad-dtype": Code(
        "error", "autocast",
        "a gradient is not in its input's dtype under autocast",
        "`grad.to(x.dtype)`"),
    "autocast-unsupported-device": Code(
        "info", "autocast",
        "CUDA autocast not checked: the Function does not run on CUDA",
        "-"),
    "checkpoint-error": Code(
        "warning", "checkpoint",
        "raises inside `torch.utils.checkpoint` (an input modified in place)",
        "no in-place writes to inputs"),
    "checkpoint-mismatch": Code(
        "error", "checkpoint",
        "gradients under checkpoint differ from plain autograd",
        "forward pure in its inputs and the torch RNG"),
    "checkpoint-needs-rng-state": Code(
        "info", "checkpoint",
        "a random forward is right under checkpoint only with `preserve_rng_state=True`",
        "keep the default"),
    "func-needs-setup-context": Code(
        "warning", "torch_func",
        "old-style `forward(ctx, ...)`: torch.func refuses it; the hint carries the rewrite",
        "`forward(*args)` + `setup_context`"),
    "func-error": Code(
        "warning", "torch_func",
        "a torch.func transform raises",
        "torch ops only in forward/backward"),
    "func-mismatch": Code(
        "error", "torch_func",
        "a torch.func transform disagrees with reverse mode",
        "no ctx state outside `setup_context`"),
    "func-unsupported-by-torch": Code(
        "info", "torch_func",
        "torch.func cannot do it (custom ops with `register_autograd`, saved-tensor hooks)",
        "nothing"),
    "vmap-randomness": Code(
        "info", "vmap",
        'random forward: vmap checked with `randomness="same"`, `"different"` must run',
        "pass `randomness=` to vmap"),
    "deploy-not-comparable": Code(
        "info", "compile, export, autocast, torch_func, vmap",
        "two eager runs from the same torch random state differ (numpy, Python `random`, a "
        "private `torch.Generator`, changing state): their value comparisons are dropped (they "
        "would compare two draws), what does not depend on values (graph breaks, export errors) "
        "stays; cells with nothing else are `n/a`",
        "draw from torch's default generator"),
    "custom-op-no-fake": Code(
        "warning", "custom_op",
        "no fake (meta) kernel: compile and export cannot trace the op",
        "`@op.register_fake`"),
    "custom-op-fake-mismatch": Code(
        "error", "custom_op",
        "the fake kernel's shapes/dtypes differ from the real kernel's",
        "make them equal"),
    "custom-op-schema": Code(
        "error", "custom_op",
        "undeclared mutation or aliasing",
        "`mutates_args`, return clones"),
    "custom-op-autograd-registration": Code(
        "error", "custom_op",
        "autograd registered in an unsupported way",
        "`register_autograd`"),
    "custom-op-aot-dispatch": Code(
        "warning", "custom_op",
        "AOTAutograd cannot trace the op",
        "traceable fake kernel and backward"),
    "custom-op-check-error": Code(
        "warning", "custom_op",
        "`torch.library.opcheck` itself could not run",
        "run it by hand"),
}

#: Codes only the ``gradsmith check`` command adds (its time limit and ``--require``).
COMMAND_ROWS: dict[str, Code] = {
    "backward-crash": Code(
        "error", "any",
        "the process died (a signal such as SIGSEGV or SIGABRT, a heap check) while backward "
        "ran on inputs forward had accepted: a C/C++/CUDA kernel in backward reading or writing "
        "out of bounds; on inputs gradsmith only tried while synthesising, not shown to fit the "
        "contract, it is a warning and the verdict is INCOMPLETE",
        "check the shapes, strides and argument order backward hands its kernels",
        "warning on inputs only tried during synthesis (INCOMPLETE)"),
    "synthesis-crash": Code(
        "warning", "any",
        "`gradsmith check` only: the process died while gradsmith was still trying candidate "
        "inputs, outside any backward but after the Function's backward had returned on them "
        "(memory a kernel corrupted on inputs outside its contract shows at a later "
        "allocation): not placed in the Function on inputs that fit, so the verdict is "
        "INCOMPLETE",
        "register inputs that fit (`@gradsmith.example`)"),
    "deployment-timeout": Code(
        "warning", "any",
        "`gradsmith check` only: time ran out in a deployment check (compile, export, ...) after "
        "every eager check had finished; that check and the deployment checks after it did not "
        "run, so a row the eager checks pass is INCOMPLETE (an eager error still FAILs it)",
        "raise `--timeout` if it is just slow, or skip the deployment checks with `--no-compat`; "
        "a Function that hangs under torch.compile or torch.export hangs where it is deployed "
        "that way"),
    "required-not-checked": Code(
        "error", "any",
        "`gradsmith check` only: a column named in `--require` (or `require` in "
        "[tool.gradsmith.check]) was not checked (`--no-compat`, the example's `compat=False`, "
        "or time ran out before it); for `second-order`, the second_order check did not run "
        "(other than for a `@once_differentiable` backward)",
        "let that check run (drop `--no-compat` or `compat=False`, raise `--timeout`), or stop "
        "requiring it"),
}

#: ``{code: (severity, check)}`` of the checker's codes (the first check where several report it).
CODES: dict[str, tuple[str, str]] = {
    code: (row.severity, row.check.split(",")[0]) for code, row in ROWS.items()}
