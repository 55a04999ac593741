"""gradsmith: verify, lint and benchmark custom PyTorch autograd Functions.

Public API (everything else is private):

- :func:`check` runs the verifier on a Function or callable and returns a :class:`Report`.
- :func:`example` registers example inputs on a Function for ``gradsmith check`` and pytest;
  :func:`examples_of` reads them back.
- :func:`lint` runs the static analyzer and returns its findings.
- :mod:`gradsmith.functional` and :mod:`gradsmith.nn`: the catalog of verified custom ops.
- :mod:`gradsmith.testing`: ``assert_gradients`` for test suites.
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version

from gradsmith._errors import GradsmithError

try:
    __version__ = version("gradsmith")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"

# Heavy parts load on first use so that `import gradsmith` (and the CLI's --help) stays fast.
_LAZY = {
    "check": ("gradsmith.checker", "check"),
    "Report": ("gradsmith.checker", "Report"),
    "Finding": ("gradsmith.checker", "Finding"),
    "example": ("gradsmith._example", "example"),
    "examples_of": ("gradsmith._example", "examples_of"),
    "lint": ("gradsmith.linter", "lint"),
    "functional": ("gradsmith.functional", None),
    "nn": ("gradsmith.nn", None),
    "testing": ("gradsmith.testing", None),
}

__all__ = ["GradsmithError", "__version__", *_LAZY]


def __getattr__(name: str):
    try:
        module_name, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'gradsmith' has no attribute {name!r}") from None
    module = import_module(module_name)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
