"""Failures of this machine's compile caches: the environment's, not the Function's.

``torch.compile`` (Inductor), Triton and ``torch.utils.cpp_extension`` keep compiled shared
libraries in on-disk caches shared by every process of the user. A compile killed while it
writes one (a timeout, Ctrl-C, a full disk) can leave the file truncated, and every later
process that loads it fails: ``ImportError: .../torchinductor_root/xy/cxyz.main.so: file too
short``. When a Function compiles part of its own code (a ``@torch.compile``d backward, a Triton
kernel), that error reaches gradsmith as if backward were wrong, and would be reported as
``backward-error`` or a layout mismatch. Nothing shows the Function is wrong: the file is.

Such a failure is ``broken-compile-cache``: a warning, the verdict INCOMPLETE (what the check
verifies is unverified), and the finding names the file to delete. Only a loader error about a
file under one of those caches counts; a user's own extension that fails to load stays the
user's error.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from gradsmith.checker.report import Finding

CODE = "broken-compile-cache"

# What the dynamic loader says of a shared library it cannot map: truncated, not ELF, gone or
# unreadable (glibc's dlopen messages, which Python's ImportError/OSError quote after the path).
_LOADER = re.compile(
    r"(?P<path>/[^\s:'\"]+?\.(?:so|pyd|dylib|cubin))['\"]?:\s*(?:"
    r"file too short|invalid ELF header|cannot read file data|"
    r"ELF load command [^\n]*|cannot open shared object file|"
    r"no such file or directory|unexpected reloc type|"
    r"only ET_DYN and ET_EXEC can be loaded)", re.IGNORECASE)


def cache_roots() -> list[Path]:
    """The compile caches of this machine: Inductor's (``TORCHINDUCTOR_CACHE_DIR``, by default
    ``$TMPDIR/torchinductor_$USER``, Triton's beneath it), Triton's own (``TRITON_CACHE_DIR``,
    ``~/.triton/cache``) and ``cpp_extension``'s (``TORCH_EXTENSIONS_DIR``,
    ``~/.cache/torch_extensions``)."""
    roots = []
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir

        roots.append(Path(cache_dir()))
    except Exception:  # noqa: BLE001 - a torch without Inductor: its cache is not in play
        pass
    home = Path.home()
    roots.append(Path(os.environ.get("TRITON_CACHE_DIR") or home / ".triton" / "cache"))
    roots.append(Path(os.environ.get("TORCH_EXTENSIONS_DIR")
                      or home / ".cache" / "torch_extensions"))
    return roots


def broken_artifact(exc: BaseException | str) -> str | None:
    """The cached file a loader error in ``exc`` (its message, its causes and the error a
    compiler wrapper carries) names, when that file lies in a compile cache; else None."""
    for text in _texts(exc):
        for match in _LOADER.finditer(text):
            path = Path(match.group("path"))
            if any(_under(path, root) for root in cache_roots()):
                return str(path)
    return None


def finding(path: str, check: str, what: str) -> Finding:
    """The ``broken-compile-cache`` finding for ``path``; ``what`` says what raised it."""
    return Finding(
        "broken-compile-cache", "warning",
        f"{what} failed loading {path}, a compiled file in this machine's compile cache that "
        "is truncated or unreadable (a compile killed while writing it leaves it so): the "
        f"environment's failure, not shown to be the Function's, so what the {check} check "
        "verifies is unverified and the verdict is INCOMPLETE",
        f"delete {path} (it is rebuilt on the next compile) or point TORCHINDUCTOR_CACHE_DIR / "
        "TRITON_CACHE_DIR at a fresh folder, then check again",
        check, details={"incomplete": True, "file": path})


def _texts(exc: BaseException | str) -> list[str]:
    if isinstance(exc, str):
        return [exc]
    texts, seen, todo = [], set(), [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        texts.append(str(e))
        todo += [e.__cause__, e.__context__, getattr(e, "inner_exception", None)]
    return texts


def _under(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except (ValueError, OSError):
        return False
    return True


def screened(found: list[Finding], check: str, exc: BaseException | None = None) -> list[Finding]:
    """``found`` with each error that a broken cached file explains (named in its message, or
    in ``exc``, the exception behind them) replaced by one ``broken-compile-cache`` finding."""
    path = broken_artifact(exc) if exc is not None else None
    kept, broken = [], None
    for f in found:
        named = path or (broken_artifact(f.message) if f.is_error else None)
        if named is None:
            kept.append(f)
        elif broken is None:
            broken = finding(named, check, f"{f.code} on this machine")
    return kept + [broken] if broken else kept
