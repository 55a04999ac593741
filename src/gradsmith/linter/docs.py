"""Generate the rule reference from the registry: ``python -m gradsmith.linter.docs``.

docs/lint.md is this module's output; a test fails when it is stale.
"""

from __future__ import annotations

import sys

from gradsmith.linter._registry import GROUPS, RULES

INTRO = """# gradsmith lint

`gradsmith lint` finds mistakes in custom `torch.autograd.Function`s before the code runs.
It reads source with `ast` only (linted code is never imported or executed), finds Function
subclasses by resolving imports and base classes across the linted modules (not by name),
finds `ctx` by position, and follows values through each method: inputs, `grad_output`,
saved tensors and their views versus fresh tensors.

    gradsmith lint                            # the current directory (same as `lint .`)
    gradsmith lint src/                       # text, grouped by file; [*] marks fixable ones
    gradsmith lint src/ --format json         # or sarif (code scanning), github (annotations)
    gradsmith lint src/ --fix                 # apply safe fixes; --diff to preview
    gradsmith lint src/ --select GS1 --ignore GS104
    gradsmith lint src/ --statistics          # count per code (also --format json)

Exit status: 0 when there is no error-level finding, 1 otherwise (0 with `--exit-zero`), 2 on
usage errors (`gradsmith lint: error: ...`, as for every command; an unknown option prints
`lint`'s usage): a path that does not exist or is a symbolic link loop, a FIFO, socket or
device (`/dev/null`: opening a FIFO would block forever), or a named file that is not Python
(no `.py` or `.pyi` suffix and no `python` `#!` line: a hostname file parses as Python, but is
not), and when `--fix` could not write a file. Such a special file found while walking a
directory is a GS002 finding; it is never opened.

- `--select` / `--ignore` take codes or prefixes (`GS1`, `GS203`); the longer match wins.
- Configuration: `[tool.gradsmith.lint]` in the nearest `pyproject.toml` (or `--config`),
  keys `select`, `ignore`, `extend-ignore`, `exclude` (globs) and `per-file-ignores`
  (`{"tests/*" = ["GS3"]}`); command-line options override it.
- `# noqa` silences every finding on a line, `# noqa: GS101,GS2` only those codes.
- Python API: `gradsmith.lint(paths or source=...)` returns `LintFinding`s (path, line, col,
  code, severity, message); `gradsmith.linter.fix(...)` returns fixed texts and diffs.
- flake8: `flake8 --select GS` (single-file resolution); pre-commit: hook id `gradsmith-lint`.
- Fixes are text edits; each round is re-linted until nothing fixable is left, and an edit
  that would produce invalid Python is dropped.
- `--fix` changes only the intended tokens: positions count lines as Python does (a form
  feed, U+2028 or `\\x1c` in a comment or string is not a line break), and a file keeps its
  encoding (PEP 263 `coding:` line), BOM and line endings (an inserted line in a CRLF file
  ends in CRLF). Each file is written to a temporary file in its folder, synced, given the
  original's mode and renamed over it, so a full disk or quota leaves the original whole. A
  file that changed on disk since it was read is not written (your newer text is kept), and
  a file that cannot be written is one line, `gradsmith lint: error: PATH: reason`; both
  exit 2, the other files are still fixed.
- Large trees (more than 4 MB of walked files, such as an installed torch) are pre-filtered
  by text: only files with a class deriving from something named `Function` (or its
  `import ... as` alias), then files subclassing or applying a discovered Function, and
  then the modules a discovered backward imports a called name from (`from .._ops import
  _segment_mm`) or calls through an imported module or package (`from . import kernels`
  then `kernels.ops.group(...)`: `kernels/ops.py`) when their text shows a way to run code
  autograd cannot see into (`triton.jit`, `cpp_extension`, `import ctypes`,
  `custom_op(`, a registrar given `__name__` or `globals()` at import time), or whose
  helper a top-level statement of backward calls for its effect (a log-and-assert that
  always raises, read by GS109), or of the functions the calls of `Fn.apply` hand a
  forward whose backward calls through ctx (`ctx.act_bwd(...)`), are parsed. Syntax errors (GS001) in skipped files are not
  reported; files named explicitly on the command line are always parsed.
- A rule that runs out of stack is run again in a worker thread with a deep stack and a
  raised recursion limit: valid code nests deeper than Python's default limit lets a
  recursive reader of the tree follow (a chain of 1,200 `.t()` calls compiles), and such a
  file must not stop a rule (GS003).

Messages are one line (at most 100 characters); `gradsmith lint --explain GS101` prints the
why, the fix and the examples below. `--fix --diff` (or `--diff`) previews the fixes as a
unified diff and never writes.

What the analysis takes into account, so that an error is always worth stopping for:

- `@classmethod` Functions: PyTorch binds `cls`, ctx is the next parameter.
- Which values are tensors: annotations (`ProcessGroup`, `int`, unions and user classes
  are not proof), non-None constant defaults, `isinstance` tests, use as `group=`,
  `.rank()`, being called, and use in tensor operations. Rules that would report an
  error for a tensor need positive evidence.
- Integer index tensors and masks (`cu_seqlens`, `*_indices`, `idx`, `mask`, `*_cnt`, or
  used as an index) carry no graph: keeping them on ctx is not reported.
- One root cause, one finding: a method that is not a `@staticmethod` (GS113) or a
  `forward(ctx, ...)` beside `setup_context` (GS114) suppresses the count findings it
  shifts (GS108, GS110, GS116, GS118, GS119, GS209); a backward that runs an opaque
  kernel (GS215) is not also reported for returning a gradient computed in forward (GS222).
  Only the first in-place write of each input in forward (GS101) and of the saved
  tensors in backward (GS103, GS227) is reported: `sub_`, `exp(out=)` and `div_` on one
  input are one defect.
- Gradients backward may ignore (GS122): outputs passed to `ctx.mark_non_differentiable`,
  outputs that are visibly integer or boolean (indices from `topk`/`max`, comparisons,
  `.long()`, `dtype=torch.int64`, names such as `idx`, `mask`, `valid_flags`) or not
  tensors (handles), and parameters named `_...` or deleted with `del` on purpose.
- A recomputation (GS123) is a call in backward of the same helper forward calls with one
  of its inputs as a keyword (`attn_mask=attn_mask`), now given `None` or a constant, with
  no argument computed from grad_output (a helper reused to compute a gradient is not a
  recomputation) and no other use of that input in backward (`ctx.attn_mask`); torch's
  own functions (`F.linear(g, w.t(), bias=None)`) are not counted. A backward helper given
  a constant for a keyword named like a forward input that shapes attention (`*mask*`,
  `*causal*`, `window`, `softcap`, `alibi`, `dropout`, `scale`) counts too when forward
  computes with that input (more than an `assert` or an `is None` test).
- A flag (GS124) is always False for an input with non-tensor evidence (a number default,
  an `int`/`bool` annotation) or a flag's name (`is_causal`, `use_bias`) no use contradicts.
- A gradient computed in forward (GS222) is a value computed from the inputs with smooth
  operations (a Triton kernel filling a buffer counts), kept on ctx or saved, and not an
  output; 0/1 masks, comparisons and rounding are piecewise constant and not reported.
- When every output is passed to `ctx.mark_non_differentiable`, backward never runs:
  findings about backward and about what forward keeps for it are dropped.
- A parameter's name alone (`dim`, `groups`, `stride`) never makes an error: passing such
  an input to `save_for_backward` is GS228 (a warning) unless an annotation, a number as
  default or a use only numbers allow shows it is not a tensor (GS105). An output passed
  to `ctx.mark_non_differentiable` has no grad_fn, so keeping it on ctx makes no cycle
  (not GS104), and neither does `self.out = out` in a legacy Function with `__init__`
  and a plain `def forward(self, ...)`: since torch 1.5 calling an instance raises and
  `Fn.apply` hands ctx to `self`, so it never runs (GS126 when forward reads that state
  from `self`, which then stands for GS113; GS113 otherwise).
  When every output is an integer or bool tensor (`.int()`, `.long()`,
  `torch.IntTensor(...)`, `dtype=torch.int32`, comparisons, a slice of one, `x.new()` or
  `x.new_zeros(...)` of an input every linted call passes an integer tensor for, such as
  `labels.int()`, an input annotated `torch.IntTensor`, `torch.cat`/`torch.stack` of
  such parts) or marked non-differentiable,
  no output can carry a gradient and backward never runs: a wrong gradient count there
  is GS229 (a warning), not GS108 or GS110. When the other outputs are tensors made with
  `x.new()` (or `new_empty`...) from an input forward does not rebind, filled in place by
  a compiled extension (`_C.voxelize(coords, out)`), their dtype is the callers': if
  backward returns only None, nothing in forward asks for a gradient and no linted call
  passes a floating tensor for that input (`x.float()`, `torch.randn`, `dtype=torch.float32`),
  the wrong count is GS248 (a warning: it fails only when that input is floating). When
  forward returns different numbers of
  outputs on different branches (`return out, map` only under `return_map=True`) and
  backward's parameters fit some of them, the others are GS246 (a warning: which branch
  runs depends on the callers); no branch fitting is not reported.
- In-place edits are followed into helper functions of the same module, methods of the
  class (`_reduce(grad_output)`) and functions imported from other linted modules; an
  argument passed by keyword fills the parameter it names (`group(g, idx, out=buf)`
  writes `buf` when `group` writes its `out`, also through `y = out` and a custom op). A
  helper called with `inplace=True` writes what its body writes (the first argument when
  its body is not linted), and `out=x if inplace else None` writes `x`: both are GS217
  (an option chosen on purpose). A write a helper makes only under its own `inplace`
  option (`if inplace:`, `x.mul_(s) if inplace else x * s`) counts only when the call
  turns it on (passed True, or a variable: GS217), not when it is off by default or passed
  False. A function whose body is not linted (a compiled extension) writes an argument
  that holds an uninitialised buffer (`torch.empty_like`, or a view of one) on one path
  and is not used before the call; when an `inplace` option binds that argument to a
  view of grad_output or an input instead (`dx1, dx2 = do1, do2` under `if inplace:`),
  the call writes that tensor: GS217. In-place `torch.distributed` collectives
  (`all_reduce`, `broadcast`, `all_to_all_single`, ...) count as in-place edits;
  `_functional_collectives` do not. On grad_output a collective is GS223, a warning (see
  the severity policy); a helper that also changes the values otherwise (`x.div_(n)` after
  the reduce) is GS102. So is `ctx.mark_dirty(grad_output)` in backward: it shows that the
  opaque call before it (an extension) wrote grad_output, and in backward it changes
  nothing.
- Triton: a launch `kernel[grid](x, ...)` of a `@triton.jit` kernel defined in the linted
  code (same module, or imported from a linted module; also a static method of a class,
  `kernel.GELU.backward[grid]`, through a package's `from .gelu import *`) writes every
  argument whose pointer the kernel stores through (`tl.store`, atomics, block pointers; a
  value read with `tl.load` is data, not a pointer; scalars annotated `tl.int32`/`tl.float32`
  in the offsets and a block pointer's shape, strides and offsets are not written), so it
  counts as an in-place edit (GS101-GS103). A store under a launch option's test is
  written only when the launch's constant selects it: `if IN_PLACE:` and its `else`, and
  `if operation == 0:` / `elif operation == 1:` by value (`operation=0` writes only what
  the first branch stores through). So does a call of a custom op (also a
  project's wrapper of `torch.library.custom_op`) at the arguments its literal
  `mutates_args` names, passed by position or keyword (`zero_out(y, out=x)`); a helper's
  name bound to `x if inplace else ...`, also inside another conditional
  (`(empty_like(x) if not inplace else x) if want_dx else None`), is written only by
  its in-place option. The items of `t.chunk(...)`, `split`, `unbind`, `tensor_split` and
  a slice of `t` with any bounds (`g[:, :rotary_dim]`) are views of `t`: writing them
  writes `t`. A Function's own private static helpers
  (`Fn.__backward(...)`, name-mangled inside the class) are followed like any helper.
  `ctx.mark_dirty` called by a helper that receives ctx counts as forward's own, and a
  tensor passed at a linted `Fn.apply(...)` call beats a number as the parameter's default.
- Opaque kernels (GS215): a Triton launch, a custom `torch.ops` namespace or
  `@torch.library.custom_op`, a module-level name bound to a `torch.cuda.jiterator` kernel
  (`_create_jit_fn`, `_create_multi_output_jit_fn`; it honours strides, so not GS221), and
  a compiled extension: a module that a `setup.py` of the
  file's folder or a folder above builds (`Extension`, `CUDAExtension`, `CppExtension`, or a
  name bound to one or a function returning one, as k2's `cmake_extension("_k2")`, given a
  literal name; the file is read, never run) or that has a
  compiled file (`SCN.cpython-311-x86_64-linux-gnu.so`, `.pyd`), however it is imported
  (`from . import SCN`, `import foo._ext as ext`, `import foo.SCN` then `foo.SCN.fn(...)`,
  `from ext import fn`, re-exported by a linted module or through its star import, or
  `from .SCN import *` when no other star import may bind the name); a name bound to
  `torch.utils.cpp_extension.load` or `load_inline` (also imported under another name) at
  module level or under `global`, or kept on a class of the module (`Accelerated.module =
  load(...)`, then `Accelerated.conv.bwd(g)`) or imported by the name it was built under
  (`load(name='plugin', ...)` then `import plugin`); an attribute of one (`fn = module.fn`, `getattr(_C,
  name)`), what a helper returns from one (`bw_fn = get_function(name)`), what a linted
  helper wrapping its argument returns (`fn = _wrap(_impl.fn)`, `_wrap` returning a closure
  that calls it), also reached as an attribute of the linted module (`impl.fn(g)`, or
  `src.gpu.fn(g)` after `from .. import src` when `src` binds `gpu = load(...)`). A module
  the code imports counts as the one a `setup.py` declares when both name the same place on
  disk (`from . import ops` in `top/ops/functions.py` of a namespace package, no
  `top/__init__.py`, is the `top.ops.ops` a top-level setup.py builds). A Python
  module or package of an extension's name in the tree is Python code, not an extension,
  except a package whose own folder holds the setup.py that builds that name
  (`gridding/setup.py` building `gridding`: its `import gridding` is the compiled module);
  a Function's `.apply` (it has its own backward) and a CapWords name with no underscore
  from an extension (a class: `CoordinateMapKey`; `Convolution_updateGradInput` is a
  function) are not kernels. A module imported by its bare name from inside a package
  (`from MinkowskiCommon import f`, the package folder on `sys.path`) is the package's
  module, and so is one under a folder the importing module adds to `sys.path` itself
  (`sys.path.append("../pkg")` or `os.path.join(os.path.dirname(__file__), "..", "pkg")`,
  taken from that module's folder). flash-attn's kernel wrappers (`from flash_attn.flash_attn_interface import
  _flash_attn_backward`) are kernels too (its `flash_attn_func` is a Function, not one).
  So is an object a linted helper returns whose class's `__getattr__` forwards to an
  attribute holding an extension (a lazy loader: `ext = utils.load_extension(...)` whose
  `module` property calls `cpp_extension.load`), also picked per device into a local
  (`fn = ext.f_backward_cuda if cuda else ext.f_backward_cpu`), and a function of a
  package outside the linted code imported beside its forward twin (`from fftconv import
  fftconv_fwd, fftconv_bwd`: a hand-written backward; a lone `scale_bwd` may be torch code),
  or called through its module (`fused_gatconv.gat_backward(...)` in a file that also calls
  `fused_gatconv.gat_forward(...)`, the module not linted). A name no statement of its
  module binds, in a module that hands itself to a call at import time
  (`_init_api("lib.sparse", __name__)`, `bind(globals())`, `sys.modules[__name__]`, or
  torch.utils.ffi's generated `_import_symbols(locals())` at module level: a ctypes/FFI
  loader binding a C library's functions, dgl's `_CAPI_*`) is a kernel too, also called
  through that module from another (`from ._ext import pointnet2` then `pointnet2.fn(g)`).
  A helper counts when it runs a kernel itself or through helpers it calls, three deep
  (below the first helper, a launch or an extension; a custom `torch.ops` call that far
  down is as likely bookkeeping, such as DTensor's device-mesh lookup); a helper that
  hands its tensors to another Function's `.apply` is differentiated through that
  Function, so the helpers it calls around it (an autocast cast, a graph index built
  through a C API) are not followed. A local bound to what a helper returns is followed
  into the returned function (`fn = select_impl(kind, stage="bwd")` then `fn(...)`, or
  `_, bwd = load_kernels()` then `bwd(...)`; every function a `return` may give counts).
  A function the linted calls of `Fn.apply` hand forward, kept on ctx (`ctx.act_bwd =
  act_bwd`, `Fn.apply(x, w, square_forward, square_backward)`), is what backward's
  `ctx.act_bwd(...)` (or `fn = ctx.act_bwd; fn(...)`) runs: followed for kernels here and
  for in-place writes (GS101-GS103, GS227), in the module of the call site.
  A local bound on any branch to an extension's function is followed too (`import
  fused_dense_lib as fused_dense_cuda` inside backward, `fn = fused_dense_cuda.wgrad` on
  one branch, then `fn(...)`). CuTe-DSL kernels count: a call of what `cute.compile(...)`
  returns (`import cutlass.cute as cute`), directly or through a function of the linted
  code that returns it (`Kernel.compile(dtype, n)(x, out)`, `k = Kernel.compile(...)`
  then `k(x, out)`), and a custom op registered by a project's wrapper of
  `torch.library.custom_op` (a decorator whose name ends in `op` given a `"ns::name"`, or
  a name and custom_op's `mutates_args=`, as `@register_kernel_op("swiglu_bwd",
  mutates_args=("g",))`, or only `mutates_args=`, the op named after the def, as
  `@xma_op(mutates_args={"dg"})`:
  `@cute_op("quack::_softmax_backward", ...)`). A kernel, or a helper running one, handed
  to a linted helper that calls that parameter (`_backward_function(...,
  backward_op=_rmsnorm_backward_triton)`) runs in backward too. A module-level name bound to a helper,
  also on one branch of an `if`/`try` at import time (`bwd = _bwd_ext` under `if`,
  `bwd = _bwd_torch` under `else`), is followed into every helper it may hold.
  A call in backward itself handed two or more tensors' addresses (`ctx.moe.backward(n,
  x.data_ptr(), g.data_ptr(), ...)`) runs native code too (one address alone may be a log
  line; a helper doing so is often a fast path taken only when no graph is built).
  So is what a linted builder class hands back (`ScaleBuilder().load()`, whose `load`,
  also inherited from a base class in another module, returns `self.jit_load()`, which
  returns what `cpp_extension.load(...)` built), bound at import time, under `global`
  (in a function or a layer's `__init__`) or returned by a getter. A folder without
  `__init__.py` inside a package is a namespace package of it: its relative imports
  (`from ..quant import f`) reach the package's modules.
- Layouts (GS221): grad_output as it arrived (no `.contiguous()`, no `.stride()`, no
  `is_contiguous()`) handed to a Triton launch or a compiled extension; and a forward
  input handed so to a Triton kernel of the linted code (directly or through helpers)
  at a parameter the kernel loads or stores through with row-major offsets of its own
  (a row index times a parameter that is not a block size: `X + row * cols + offs`,
  `X + i_bh * T * D + ...`), or as the base of a block pointer whose strides it computes
  from sizes (`make_block_ptr(v + i_h * V, (T, V), (H * V, 1), ...)`): a caller's
  transposed or split input is read at the wrong addresses. A flat offset (`X + pid *
  BLOCK + tl.arange(0, BLOCK)`: an elementwise kernel, which reads a permuted dense
  tensor in its own memory order, or a weight vector), a parameter used as a number
  (multiplied, compared, a bound), a block pointer or tensor descriptor given its
  strides, an input forward makes contiguous or asks for its strides, and one every
  linted call passes as `x.contiguous()` are not reported; an input handed to a compiled
  extension is not either (its C++ may copy or check the layout).
- `out=` is an output buffer only for torch's own functions (for a custom kernel it may
  name an input). Saved intermediates (neither input nor output) edited in backward, and
  a backward with an explicit `inplace` mode, are not GS103 (nothing the caller holds
  changes); the first such edit of an intermediate is GS227, a warning, as only a second
  backward through the graph fails. A saved input that backward's explicit `inplace` mode
  picks as the gradient's buffer (`grad = logits if ctx.inplace else None`, then
  `kernel(..., out=grad)`) is GS217, a warning naming the option: the caller asked for
  it, and its tensor is overwritten. What a helper receiving ctx saves (`save(ctx, dx)`
  whose body calls `ctx.save_for_backward(*tensors)`, in this module or another linted
  one) is known as surely as a direct save; when forward saves different numbers of
  tensors on different branches, each unpack in backward is matched to the save of its
  length (an intermediate only where every save of that length has one). A call backward
  makes for its effect alone
  (result unused; not torch's, not a linted helper whose body shows its writes), handed the
  output's gradient and a saved intermediate that backward then returns as a gradient
  (`kernel_inplace(g, target, softmax)` then `return softmax, None`), filled that
  intermediate: GS227 too. A backward that only raises is not counted.

Exemptions: in-place updates of forward inputs named `running_*`, `moving_*` or
`num_batches_tracked`, or whose gradient backward always returns as `None` (state such as
statistics buffers and codebooks, never differentiated; also an input `forward(ctx,
*args)` unpacks from `args` at its top level), are not reported by GS101. Such a state
input saved for backward and updated there (`amax.fill_(g.abs().max())`, delayed scaling)
is GS227, a warning, not GS103: nothing differentiated changes and the first backward is
right; only a second backward through the graph raises. `return g, *no_grads` with
`no_grads = (None, None)` bound once in backward counts as literal Nones. `detach_()`
changes no values, only the graph of the one tensor object it is called on: on an input
parameter itself (or `args[i]`, `for t in args`) it is GS101, since the caller's tensor
loses its history (a leaf stops requiring grad; the caller's gradient through a non-leaf
is silently missing); on a view, a detached copy or the results of a call on detached
copies (a reversible block's `ctx.fn(*x)` under `no_grad`) it is not reported.

## Severity policy

Every rule is held to this; a finding's severity is its rule's.

- **error**: a demonstrated run-time failure on the pinned torch: an exception (TypeError,
  a count error, AttributeError), a wrong gradient or a corrupted tensor, on a path that
  runs when the code is used as written. Each error's message says what fails. Where the
  analysis cannot prove the path runs (a fall-through that needs no input to want a
  gradient, a `forward(None, ...)` under `torch.no_grad()`, a forward-only Function) the
  rule stays silent or reports a warning. No false errors is the design goal. So a direct
  `Fn.forward(...)` is an error (GS111) only where it cannot run as written (ctx left out,
  or None where forward uses ctx); given a ctx of its own (a stand-in object in a test of
  forward alone, the class on a debug path) it runs, and bypassing backward is GS214.
- **warning**: a likely problem, or one that bites only in some uses (double backward,
  non-contiguous gradients, other dtypes, call sites not in the linted code), and accurate
  but harmless cases of legacy style (a plain `def backward` runs correctly: GS113).
- **info**: wasted work (memory, time, host syncs) with correct results.

Writing grad_output in place harms only when autograd or the caller reads that buffer
again, and that is the callers' choice, not visible in the Function: so both are
warnings. Arithmetic, fills, index writes and kernel stores (GS102) change it on every
run: `fn(x).sum().backward()` hands backward an expanded gradient and the write raises,
and a gradient autograd shares with another branch (`y + z`) or the caller passed
(`y.backward(g)`) is silently changed; where the output feeds one consumer that makes a
fresh gradient (a matmul, a gather) nothing goes wrong. An in-place collective
(`dist.all_reduce(grad_output)`, the backward of a tensor-parallel copy; GS223) changes
nothing on one process, a summed output included, and needs several processes and a
shared buffer to do harm. A collective on a forward
input stays GS101 (error): an input is often an output its producer saved (`exp`,
`softmax` and `sigmoid` keep theirs), whose backward then reads the sum over ranks (a
reduced case with two gloo processes, benchmarks/results/lint_newcorpus.md).

A forward input changed in place without `ctx.mark_dirty` (GS101) harms whoever reads it
after the call: the caller, or an operation that saved it for its own backward. With no
call in the linted code (a library's Function) that reader is the library's user, and
GS101 stays an error, as it does when a linted call shows a reader: the calling function
reads the name again after the call, passes a tensor others hold (`self.buf`, a global),
or passes the output of an operation whose backward reads it (`torch.sigmoid`, `exp`,
`softmax`, ...). When the Function has linted calls and every one of them (directly,
through `fn = Fn.apply`, through a plain wrapper `def f(x): return Fn.apply(x)` and
`self.f = f` called as `self.f(x)`; a module-level `f = Fn.apply` imported by other
modules, where a same-named function imported from outside the linted code, such as
`torch.distributed.all_reduce(t)` beside `all_reduce = Fn.apply`, is not a call of it)
passes a fresh result or a name its function never
reads after the call (`loss = ce(output.float().contiguous(), labels)`, `out =
self.reduce(out)`), no failure is shown: GS230, a warning. A Function imported under
another name, called directly or whose `apply` is handed on keeps GS101 (its callers
are out of sight).

An output kept on ctx makes a reference cycle (output -> graph node -> ctx -> output) that
only the cycle collector frees (GS104, error: every graph built leaks until it runs, and
after backward too). When backward releases the attribute on every path (`ctx.outs =
[out]` then `ctx.outs.pop()`, `del ctx.out`, `ctx.out = None`), the cycle is broken
whenever backward runs; only a graph built and never differentiated stays alive longer,
no result is wrong: GS234, a warning.

Real-code evaluation: `benchmarks/lint_realcode.py` lints 14 public projects (pinned
commits) and looks up a judgement for every error-level finding and a sample of the others
(`benchmarks/results/lint_realcode.md`).
"""

DEVIATIONS = """## Error-level findings in the installed torch package (reviewed)

`benchmarks/lint_torch.py` lints the whole installed torch; its results are in
`benchmarks/results/lint_torch.md`. Each error-level finding there was reviewed; these are
deliberate deviations in torch, not rule bugs:

Since GS230 (an input changed in place that no linted caller reads again is a warning) the
torch package has no error-level finding: both findings below are GS230 now, as their
review predicted (the callers torch has never reuse the input). Reviewed as GS101:

- **GS101** `torch/_dynamo/create_parameter_op.py` (`TracableCreateParameter.forward`):
  `placeholder.set_(tensor)` swaps the storage of an input without `mark_dirty`. Dynamo
  uses a sacrificial placeholder so that gradients flow into a parameter created inside a
  compiled region; the mutation is the point, and the placeholder is never used elsewhere.
- **GS101** `torch/autograd/_functions/tensor.py` (`Resize.forward`): `tensor.copy_(tensor)`
  on quantized tensors copies a tensor onto itself, so no value changes; it is used to
  produce a well-formed quantized result, not to modify the input.

Findings reviewed and fixed in the rules while building them: `ctx.attr = output[i]` where
the output element is a NumPy array (GS104 now needs the element to be a tensor); `apply`
called with `**kwargs` that may be empty (GS112 now needs a named keyword).
"""


def generate() -> str:
    """The Markdown rule reference."""
    out = [INTRO]
    for prefix, title in GROUPS.items():
        codes = sorted(c for c in RULES if c.startswith(prefix))
        if not codes:
            continue
        out.append(f"## {prefix}xx: {title}\n")
        out.append("| Code | Name | Severity | Fix |\n|---|---|---|---|")
        for code in codes:
            r = RULES[code]
            out.append(f"| [{code}](#{code.lower()}) | {r.name} | {r.severity} | "
                       f"{'yes' if r.autofix else ''} |")
        out.append("")
        for code in codes:
            r = RULES[code]
            out.append(f"### {code}\n")
            out.append(f"**{r.name}** ({r.severity}{', auto-fix' if r.autofix else ''}). "
                       f"{r.summary}.\n")
            out.append(f"*Why:* {r.why}\n")
            out.append(f"*Fix:* {r.fix}\n")
            out.append("Bad:\n\n```python\n" + r.bad.rstrip() + "\n```\n")
            out.append("Good:\n\n```python\n" + r.good.rstrip() + "\n```\n")
    out.append(DEVIATIONS)
    return "\n".join(out).rstrip() + "\n"


def explain(code: str) -> str:
    """What rule ``code`` finds, why it matters, the fix and its examples (``--explain``).

    Raises:
        GradsmithError: ``code`` is not a rule code.

    Example:
        >>> import gradsmith.linter
        >>> explain("gs102").splitlines()[0]
        'GS102 inplace-grad-output (warning, auto-fix)'
    """
    from gradsmith._errors import GradsmithError

    rule = RULES.get(code.strip().upper())
    if rule is None:
        raise GradsmithError(
            f"--explain got {code!r}, which is not a rule code; expected one such as GS101 "
            f"(all codes: docs/lint.md)"
        )
    return "\n".join([
        f"{rule.code} {rule.name} ({rule.severity}{', auto-fix' if rule.autofix else ''})", "",
        f"{rule.summary}.", "", f"Why: {rule.why}", "", f"Fix: {rule.fix}", "",
        "Bad:", "", _indent(rule.bad), "", "Good:", "", _indent(rule.good),
    ])


def _indent(code: str) -> str:
    return "\n".join(("    " + line).rstrip() for line in code.rstrip().splitlines())


def main() -> int:
    """Print the reference (redirect it to docs/lint.md)."""
    import gradsmith.linter  # noqa: F401  (registers the rules)

    sys.stdout.write(generate())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
