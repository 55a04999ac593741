"""PyTorch is an optional dependency: one place that says how to install it.

``gradsmith lint`` (and its flake8 plugin and pre-commit hook) never imports torch, so the
distribution does not require it (see docs/install.md). Everything that does need torch (the
verifier, the op catalog, the benchmarks) calls :func:`require_torch` before importing it, so
a missing torch is one line that names the command to run instead of a traceback.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import warnings

#: The lowest torch version gradsmith is tested with (CI pins exactly this one).
TORCH_REQUIREMENT = "torch>=2.13.0"

#: PyTorch's CPU-only wheel index, as on https://pytorch.org/get-started/locally/.
CPU_INDEX_URL = "https://download.pytorch.org/whl/cpu"


class TorchMissingError(ModuleNotFoundError):
    """torch is not installed; the message is one line with the install command."""


def torch_missing_message(feature: str) -> str:
    """The one-line message for ``feature`` needing torch.

    Example:
        >>> torch_missing_message("gradsmith check").split(";")[0]
        'gradsmith check needs PyTorch (torch>=2.13.0), which is not installed'
    """
    return (f"{feature} needs PyTorch ({TORCH_REQUIREMENT}), which is not installed; "
            f"install the CPU build with: pip install torch --index-url {CPU_INDEX_URL} "
            "(GPU builds: https://pytorch.org/get-started/locally/)")


def require_torch(feature: str) -> None:
    """Raise :class:`TorchMissingError` naming ``feature`` if torch cannot be imported.

    Looks the module up without importing it, so the check costs nothing when torch is
    there (the caller's own ``import torch`` follows); only without NumPy does it import
    torch itself, silencing torch's "Failed to initialize NumPy" warning.

    Args:
        feature: What needs torch, as the user called it (``"gradsmith check"``).

    Raises:
        TorchMissingError: torch is not installed (a ``ModuleNotFoundError`` with
            ``name="torch"``, so ``except ImportError`` still catches it).
    """
    if importlib.util.find_spec("torch") is None:
        raise TorchMissingError(torch_missing_message(feature), name="torch")
    if "torch" not in sys.modules and _numpy_missing():
        # NumPy is not a dependency, but torch says "Failed to initialize NumPy" at import
        # when it is absent: the first thing a user would see of gradsmith bench.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Failed to initialize NumPy",
                                    category=UserWarning)
            import torch  # noqa: F401


def _numpy_missing() -> bool:
    return not on_path("numpy")


def on_path(name: str) -> bool:
    """Whether the top-level module ``name`` is imported or can be found on ``sys.path``.

    Unlike :func:`importlib.util.find_spec`, this never asks the finders on
    ``sys.meta_path``: a user's finder may act on its first lookup of a module (a
    ``sitecustomize`` shim that patches numpy's loader and then removes itself), and a
    lookup made by gradsmith before the user's code imports the module would spend it, so
    the user's code would import differently under gradsmith than under plain ``python``.

    Example:
        >>> on_path("sys"), on_path("no_such_module_xyz")
        (True, False)
    """
    if name in sys.modules:
        return sys.modules[name] is not None  # None: `import name` raises ImportError
    try:
        return importlib.machinery.PathFinder.find_spec(name) is not None
    except (ImportError, ValueError):  # a broken install
        return False


#: The ``onnx`` extra (pyproject.toml): what the opt-in ONNX deployment check needs.
ONNX_EXTRA = ("onnx", "onnxruntime", "onnxscript")
ONNX_INSTALL = "pip install 'gradsmith[onnx]'"


def onnx_missing() -> list[str]:
    """The modules of the ``onnx`` extra that are not installed (looked up, not imported)."""
    return [m for m in ONNX_EXTRA if importlib.util.find_spec(m) is None]


def require_onnx(who: str, asked: str) -> None:
    """Raise :class:`GradsmithUsageError` naming the extra when the ONNX check is asked for
    (``asked``: how, e.g. ``"--require onnx"``) and part of the extra is not installed."""
    absent = onnx_missing()
    if absent:
        from gradsmith._errors import GradsmithUsageError

        raise GradsmithUsageError(
            f"{who}: {asked} needs the onnx extra, and {', '.join(absent)} "
            f"{'is' if len(absent) == 1 else 'are'} not installed; install it with "
            f"`{ONNX_INSTALL}` (or `pip install {' '.join(ONNX_EXTRA)}`), or stop asking "
            "for onnx")
