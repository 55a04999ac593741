"""Deployment checks: does the Function survive what happens to it after eager float64?

One module per property, each a check like the others (``run(session) -> findings``):

- :mod:`.custom_ops` (``custom_op``): what ``torch.library.opcheck`` tests, for custom ops;
- :mod:`.precision` (``precision``): float32 and the user's dtype against float64;
- :mod:`.compiled` (``compile``): ``torch.compile(fullgraph=True)``, graph breaks, equality;
- :mod:`.exported` (``export``): ``torch.export`` and whether it keeps the custom backward;
- :mod:`.amp` (``autocast``): CPU bfloat16 (and CUDA float16) autocast;
- :mod:`.checkpointing` (``checkpoint``): non-reentrant activation checkpointing;
- :mod:`.functorch` (``torch_func``): ``grad``, ``vjp``, ``jacrev``, ``jacfwd``;
- :mod:`.onnx_export` (``onnx``, opt-in): ``torch.onnx.export`` run under ONNX Runtime.

:mod:`.matrix` turns the findings into the per-Function compatibility matrix
(eager / compile / export / autocast / float32 / checkpoint / torch.func / onnx).
"""

from __future__ import annotations

#: check name -> module, in the order they run (after the eager checks).
DEPLOY_MODULES = {
    "custom_op": "gradsmith.checker.deploy.custom_ops",
    "precision": "gradsmith.checker.deploy.precision",
    "compile": "gradsmith.checker.deploy.compiled",
    "export": "gradsmith.checker.deploy.exported",
    "autocast": "gradsmith.checker.deploy.amp",
    "checkpoint": "gradsmith.checker.deploy.checkpointing",
    "torch_func": "gradsmith.checker.deploy.functorch",
    "onnx": "gradsmith.checker.deploy.onnx_export",
}
#: Deployment checks that run only when asked for (``onnx=True``, ``checks=``, ``--require``):
#: each costs seconds per Function and needs an optional extra.
OPT_IN = ("onnx",)
