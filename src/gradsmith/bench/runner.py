"""Run benchmark cases: time and saved bytes of each op next to its reference, plus environment."""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Iterable
from importlib import metadata
from typing import Any

import torch

from gradsmith.bench.cases import BenchCase
from gradsmith.bench.memory import saved_bytes
from gradsmith.bench.timing import interleaved

__all__ = ["run_case", "run", "environment", "SCHEMA_VERSION"]

SCHEMA_VERSION = 1


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _installed_version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def environment() -> dict[str, Any]:
    """What a reader needs to reproduce the numbers: versions, CPU model, threads, and the
    soft sort anchor (torchsort, None when not installed)."""
    import gradsmith
    from gradsmith.ops._pav_native import backend

    return {
        "gradsmith": gradsmith.__version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "pav_backend": backend(),
        "torchsort": _installed_version("torchsort"),
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        # other processes compete for the cores; a 1-minute load above ~1 means noisy numbers
        "load_average_1min": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def run_case(case: BenchCase, repeat: int = 10, warmup: int = 2,
             quick: bool = False) -> dict[str, Any]:
    """Measure one case: interleaved forward+backward timings and saved-for-backward bytes.

    Returns:
        A JSON-ready dict (see ``docs/bench.md`` for the schema).
    """
    stats = interleaved({"op": (case.op, lambda: case.inputs(quick)),
                         "reference": (case.reference, lambda: case.inputs(quick))},
                        repeat=repeat, warmup=warmup)
    if case.hooks_visible:
        op_bytes = saved_bytes(case.op, case.inputs(quick))
        ref_bytes = saved_bytes(case.reference, case.inputs(quick))
    else:
        op_bytes = ref_bytes = None
    return {
        "op": case.name,
        "reference": case.reference_name,
        "shape": case.shape[1 if quick else 0],
        "time_ms": {"op": stats["op"].to_dict(), "reference": stats["reference"].to_dict()},
        "time_ratio": _ratio(stats["op"].median, stats["reference"].median),
        "saved_bytes": {"op": op_bytes, "reference": ref_bytes},
        "saved_ratio": _ratio(op_bytes, ref_bytes),
    }


def run(cases: Iterable[BenchCase], repeat: int = 10, warmup: int = 2, quick: bool = False,
        progress=None) -> dict[str, Any]:
    """Run ``cases`` in order and return the full JSON-ready report.

    Args:
        cases: from :func:`gradsmith.bench.registry`.
        repeat: timed runs per candidate.
        warmup: untimed runs per candidate.
        quick: small inputs (seconds for the whole registry).
        progress: optional callable ``(case_name) -> None`` called before each case.

    Example:
        >>> from gradsmith.bench import registry
        >>> report = run([registry()["gelu"]], repeat=2, warmup=1, quick=True)
        >>> report["results"][0]["op"], report["results"][0]["saved_bytes"]["reference"]
        ('gelu', 16384)
    """
    results = []
    for case in cases:
        if progress is not None:
            progress(case.name)
        results.append(run_case(case, repeat=repeat, warmup=warmup, quick=quick))
    return {"schema": SCHEMA_VERSION, "environment": environment(), "repeat": repeat,
            "warmup": warmup, "quick": quick, "results": results}
