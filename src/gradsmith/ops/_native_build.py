"""Build and cache the catalog's small C kernels with the system compiler, at first use.

Each kernel is plain C (no torch or Python headers), compiled once per source into
``$XDG_CACHE_HOME/gradsmith`` (or ``~/.cache/gradsmith``) as ``STEM-<hash of the source>.so``
and loaded with ctypes. Why at first use and not at install time: ``docs/ops-sort-quant.md``
("Native kernels") has the measurements. A missing compiler, a read-only cache or a failed load
raises :class:`NativeUnavailable`; callers fall back to their torch implementation.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

__all__ = ["NativeUnavailable", "cache_dir", "open_library"]


class NativeUnavailable(RuntimeError):
    """The kernel cannot be built or loaded here (the message says why)."""


def cache_dir() -> Path:
    """Where built kernels are kept."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "gradsmith"


def _compiler() -> str:
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise NativeUnavailable("no C compiler found (set CC or install gcc/clang)")
    return compiler


def _build(source: str, target: Path, flags: tuple[str, ...]) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        src = Path(tmp) / f"{target.stem}.c"
        src.write_text(source)
        out = Path(tmp) / target.name
        subprocess.run([_compiler(), "-O3", *flags, "-shared", "-fPIC", "-o", str(out), str(src),
                        "-lm"], check=True, capture_output=True, timeout=120)
        os.replace(out, target)  # atomic: concurrent builders never see a partial library


def library_path(stem: str, source: str, flags: tuple[str, ...] = ()) -> Path:
    """The cached library's path for ``source`` built with ``flags`` (it may not exist yet)."""
    digest = hashlib.sha256("\0".join((source, *flags)).encode()).hexdigest()[:16]
    return cache_dir() / f"{stem}-{digest}.so"


def open_library(stem: str, source: str, flags: tuple[str, ...] = ()) -> ctypes.CDLL:
    """Build ``source`` with the compiler ``flags`` if it is not cached yet, and load it.

    Raises:
        NativeUnavailable: no compiler, the build failed, or the library cannot be loaded.
    """
    target = library_path(stem, source, flags)
    try:
        if not target.exists():
            _build(source, target, flags)
        return ctypes.CDLL(str(target))
    except NativeUnavailable:
        raise
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        raise NativeUnavailable(f"building {target.name} failed: {exc} "
                                f"{detail.decode(errors='replace')[-300:]}".strip()) from exc
