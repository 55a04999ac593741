"""GS217, GS220, GS223, GS227, GS230: in-place writes that are warnings (chosen by an option,
made by a kernel or by torch on an intermediate, by a collective, or on an input no caller
reads again), defined beside the errors' checker."""

from __future__ import annotations

from gradsmith.linter._registry import Rule

_IMPORT = "import torch\n\n\n"
GS217 = Rule(
    "GS217", "inplace-option", "warning",
    "An explicit in-place option (`inplace=True`, a kernel launch flag such as `IN_PLACE=`) "
    "writes into a forward input, grad_output or a saved tensor",
    "The option was chosen on purpose, so the write may be intended (memory), but the "
    "caller's tensor changes and autograd is not told: uses of it after the call see the "
    "new values.",
    "pass `inplace=False` (or clone first) unless no one else uses the tensor; for a forward "
    "input, call `ctx.mark_dirty(x)` and return it.",
    bad=_IMPORT + "import torch.nn.functional as F\n\n\nclass Act(torch.autograd.Function):\n"
    "    @staticmethod\n    def forward(ctx, x):\n        return F.relu(x, inplace=True)  # GS217\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        return g\n",
    good=_IMPORT + "import torch.nn.functional as F\n\n\nclass Act(torch.autograd.Function):\n"
    "    @staticmethod\n    def forward(ctx, x):\n        return F.relu(x)\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        return g\n",
    brief="explicit in-place option",
)
GS220 = Rule(
    "GS220", "kernel-overwrites-saved", "warning",
    "A kernel launched in backward writes into a tensor forward saved (an intermediate)",
    "Raw kernel writes do not bump the tensor's version, so autograd cannot notice: a "
    "second backward through the same graph (retain_graph=True, or gradient accumulation "
    "over one forward) silently reads the overwritten values.",
    "write the gradient into a new tensor (`torch.empty_like(saved)`), or decorate backward "
    "with `@once_differentiable` and document that the graph cannot be reused.",
    bad=_IMPORT + "import triton\n\n\n@triton.jit\ndef _bwd(P, G):\n    tl.store(P, tl.load(P) * tl.load(G))\n\n\n"
    "class Softmax(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
    "        p = x.softmax(-1)\n        ctx.save_for_backward(p)\n        return p.clone()\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        (p,) = ctx.saved_tensors\n"
    "        _bwd[(1,)](p, g)  # GS220\n        return p\n",
    good=_IMPORT + "import triton\n\n\n@triton.jit\ndef _bwd(P, G, D):\n    tl.store(D, tl.load(P) * tl.load(G))\n\n\n"
    "class Softmax(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
    "        p = x.softmax(-1)\n        ctx.save_for_backward(p)\n        return p.clone()\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        (p,) = ctx.saved_tensors\n"
    "        d = torch.empty_like(p)\n        _bwd[(1,)](p, g, d)\n        return d\n",
    brief="kernel overwrites a saved tensor: a second backward reads garbage",
)
GS223 = Rule(
    "GS223", "collective-on-grad-output", "warning",
    "An in-place collective (`dist.all_reduce`, `broadcast`, ...) writes grad_output in backward",
    "The reduced value is this path's gradient (the backward of a tensor-parallel copy), and "
    "on one process the collective changes nothing (an expanded `out.sum()` gradient "
    "included); the harm needs several processes and a buffer someone reads again: a "
    "gradient autograd also passes to another branch (`y + z`) or the caller passed "
    "(`y.backward(g)`) then holds the sum over ranks. Where the output feeds one consumer "
    "(a linear layer) the gradient is fresh and nothing goes wrong, so this is a warning.",
    "reduce a copy (`g = grad_output.clone()`, then `dist.all_reduce(g)`), or use "
    "`torch.distributed._functional_collectives.all_reduce`, which returns a new tensor.",
    bad=_IMPORT + "import torch.distributed as dist\n\n\nclass CopyToParallel(torch.autograd.Function):\n"
    "    @staticmethod\n    def forward(ctx, x):\n        return x\n\n    @staticmethod\n"
    "    def backward(ctx, grad_output):\n        dist.all_reduce(grad_output)  # GS223\n"
    "        return grad_output\n",
    good=_IMPORT + "import torch.distributed as dist\n\n\nclass CopyToParallel(torch.autograd.Function):\n"
    "    @staticmethod\n    def forward(ctx, x):\n        return x\n\n    @staticmethod\n"
    "    def backward(ctx, grad_output):\n        g = grad_output.clone()\n"
    "        dist.all_reduce(g)\n        return g\n",
    brief="grad_output reduced in place by a collective",
)
GS227 = Rule(
    "GS227", "inplace-saved-intermediate", "warning",
    "backward modifies in place a tensor forward saved that is neither an input nor an output",
    "Nothing the caller holds changes, and the first backward is right; but the saved tensor "
    "is part of the graph: a second backward through it (retain_graph=True, or "
    "torch.autograd.grad twice) raises 'one of the variables needed for gradient computation "
    "has been modified by an inplace operation'. The Megatron cross-entropy idiom saves "
    "memory this way on purpose.",
    "compute the gradient into a new tensor (`grad = softmax * g`), or document that the "
    "graph cannot be reused.",
    bad=_IMPORT + "class Softmax(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
    "        p = x.softmax(-1)\n        ctx.save_for_backward(p)\n        return p.clone()\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        (p,) = ctx.saved_tensors\n"
    "        dot = (p * g).sum(-1, keepdim=True)\n        p.mul_(g - dot)  # GS227\n        return p\n",
    good=_IMPORT + "class Softmax(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
    "        p = x.softmax(-1)\n        ctx.save_for_backward(p)\n        return p.clone()\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        (p,) = ctx.saved_tensors\n"
    "        dot = (p * g).sum(-1, keepdim=True)\n        return p * (g - dot)\n",
    brief="saved intermediate modified in backward: a second backward raises",
)
GS230 = Rule(
    "GS230", "inplace-input-unread", "warning",
    "A forward input is modified in place without ctx.mark_dirty, but every call of the "
    "Function in the linted code passes a value nothing reads after the call",
    "The write is real (GS101's defect), but its harm needs someone to read the input "
    "again: the caller, or an operation that saved it for its own backward. Every call the "
    "linter sees passes a fresh result, or a name its function does not read after the call "
    "(`loss = ce(logits.float(), labels)`), so no failure is shown; a caller elsewhere, or "
    "one added later, that reuses the tensor sees it changed.",
    "compute out of place (`x = x - m` instead of `x.sub_(m)`), or call `ctx.mark_dirty(x)` "
    "and return `x`.",
    bad=_IMPORT + "class Center(torch.autograd.Function):\n    @staticmethod\n"
    "    def forward(ctx, x):\n        x.sub_(x.mean())  # GS230\n        return x * 1\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        return g - g.mean()\n\n\n"
    "def centered_sum(logits):\n    return Center.apply(logits.float()).sum()\n",
    good=_IMPORT + "class Center(torch.autograd.Function):\n    @staticmethod\n"
    "    def forward(ctx, x):\n        return x - x.mean()\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        return g - g.mean()\n\n\n"
    "def centered_sum(logits):\n    return Center.apply(logits.float()).sum()\n",
    brief="input modified in place without ctx.mark_dirty (no caller reads it again)",
)
