"""Run benchmark cases: time, saved bytes and peak memory of each op next to its reference.

Each case is measured in one or more modes: ``eager`` (the functions as given) and
``compiled`` (both sides wrapped in ``torch.compile``, compiled during the warm-up; the first
call's latency is reported as ``compile_s``). A side that fails (a compile error, a reference
that cannot run these inputs) becomes a note on its row, never an exception.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable, Iterable, Sequence
from importlib import metadata
from typing import Any

import torch

from gradsmith._errors import GradsmithUsageError
from gradsmith.bench.cases import BenchCase
from gradsmith.bench.memory import peak_bytes, saved_bytes
from gradsmith.bench.timing import (
    Stats,
    forward_backward,
    interleaved_samples,
    join_notes,
    ratio_spread,
)

__all__ = ["run_case", "run", "environment", "SCHEMA_VERSION", "MODES"]

SCHEMA_VERSION = 2
MODES = ("eager", "compiled")


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


def environment(device: str | torch.device = "cpu") -> dict[str, Any]:
    """What a reader needs to reproduce the numbers: versions, CPU model, threads, the device,
    and the soft sort anchor (torchsort, None when not installed)."""
    import gradsmith
    from gradsmith.ops._pav_native import backend

    device = torch.device(device)
    env = {
        "gradsmith": gradsmith.__version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "device": str(device),
        "pav_backend": backend(),
        "torchsort": _installed_version("torchsort"),
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        # other processes compete for the cores; a 1-minute load above ~1 means noisy numbers
        "load_average_1min": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
    }
    if device.type == "cuda":
        env["gpu"] = torch.cuda.get_device_name(device)
        env["cuda"] = torch.version.cuda
    return env


def check_device(device: str | torch.device) -> torch.device:
    """The device to measure on; a usage error when it is not available here."""
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError):
        raise GradsmithUsageError(
            f"gradsmith bench: --device must be 'cpu' or 'cuda' (or 'cuda:N'), got {device!r}"
        ) from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise GradsmithUsageError(
            "gradsmith bench: --device cuda, but no CUDA GPU is available here (torch "
            f"{torch.__version__}); run on a machine with a GPU, or use --device cpu")
    if device.type not in ("cpu", "cuda"):
        raise GradsmithUsageError(
            f"gradsmith bench: --device must be 'cpu' or 'cuda', got {str(device)!r}")
    return device


def to_device(value: Any, device: torch.device) -> Any:
    """A fresh leaf copy of every tensor on ``device`` (modules moved), other values as they are."""
    if isinstance(value, torch.Tensor):
        if value.device == device:
            return value
        return value.detach().to(device).requires_grad_(value.requires_grad)
    if isinstance(value, torch.nn.Module):
        return value.to(device)
    if isinstance(value, (tuple, list)):
        return type(value)(to_device(v, device) for v in value)
    return value


def _clock(device: torch.device) -> Callable[[], float]:
    if device.type != "cuda":
        return time.perf_counter

    def synced() -> float:  # CUDA runs asynchronously: wait for the queued work before reading
        torch.cuda.synchronize(device)
        return time.perf_counter()

    return synced


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def _prepare(fn: Callable[..., Any], compiled: bool, make: Callable[[], Sequence[Any]]):
    """The function to time in this mode, and the first call's latency (compile included).

    Returns ``(fn, seconds, None)`` or ``(None, None, reason)`` when it cannot run.
    """
    if compiled:
        fn = torch.compile(fn)
    try:
        inputs = make()
        start = time.perf_counter()
        forward_backward(fn, inputs)
        return fn, time.perf_counter() - start, None
    except Exception as exc:  # user code, or a compile failure: a note on the row
        what = "torch.compile failed" if compiled else "it failed"
        return None, None, f"{what}: {_first_line(exc)}"


def run_case(case: BenchCase, repeat: int = 10, warmup: int = 2, quick: bool = False,
             mode: str = "eager", device: str | torch.device = "cpu",
             peak: bool = True) -> dict[str, Any]:
    """Measure one case in one mode: interleaved forward+backward timings, saved-for-backward
    bytes and peak memory of the op and of its reference.

    Args:
        case: the op, its reference (or ``None``) and inputs.
        repeat: timed runs per side.
        warmup: untimed runs per side after the first call (which compiles, in ``compiled``).
        quick: the case's small inputs.
        mode: ``"eager"`` or ``"compiled"`` (both sides through ``torch.compile``).
        device: where the inputs live; CUDA timings synchronize around every run.
        peak: also measure peak memory (one extra profiled step per side on the CPU).

    Returns:
        A JSON-ready dict (see ``docs/bench.md`` for the schema).
    """
    if mode not in MODES:
        raise GradsmithUsageError(f"gradsmith bench: mode must be one of {', '.join(MODES)}, "
                                  f"got {mode!r}")
    device = torch.device(device)
    compiled = mode == "compiled"
    if compiled:
        torch._dynamo.reset()  # fresh caches: no recompile limit shared with earlier cases

    def make() -> Sequence[Any]:
        return to_device(tuple(case.inputs(quick)), device)

    notes = case.note.split("; ") if case.note else []  # parts joined by join_notes
    op, op_first, op_problem = _prepare(case.op, compiled, make)
    ref = ref_first = None
    if case.reference is not None:
        ref, ref_first, ref_problem = _prepare(case.reference, compiled, make)
        if ref_problem:
            notes.append(f"reference: {ref_problem}")
    row: dict[str, Any] = {
        "op": case.name, "mode": mode, "reference": case.reference_name,
        "shape": case.shape[1 if quick else 0],
        "time_ms": {"op": None, "reference": None}, "time_ratio": None,
        "time_ratio_iqr": None, "compile_s": None,
        "saved_bytes": {"op": None, "reference": None}, "saved_ratio": None,
        "peak_bytes": {"op": None, "reference": None}, "peak_ratio": None,
        "error": op_problem, "note": None,
    }
    if compiled:
        row["compile_s"] = {"op": op_first, "reference": ref_first}
    if op is not None:
        sides = {"op": op} if ref is None else {"op": op, "reference": ref}
        candidates = {name: (fn, make) for name, fn in sides.items()}
        samples = interleaved_samples(candidates, repeat=repeat, warmup=warmup,
                                      clock=_clock(device))
        for name, fn in sides.items():
            row["time_ms"][name] = Stats.of(samples[name]).to_dict()
            if case.hooks_visible:
                row["saved_bytes"][name] = saved_bytes(fn, make())
            if peak:
                row["peak_bytes"][name] = _peak(fn, make, device)
        if ref is not None:
            median, q1, q3 = ratio_spread(samples["op"], samples["reference"])
            row["time_ratio"], row["time_ratio_iqr"] = median, [q1, q3]
            row["saved_ratio"] = _ratio(row["saved_bytes"]["op"], row["saved_bytes"]["reference"])
            row["peak_ratio"] = _ratio(row["peak_bytes"]["op"], row["peak_bytes"]["reference"])
    row["note"] = join_notes(notes)
    return row


def _peak(fn: Callable[..., Any], make: Callable[[], Sequence[Any]],
          device: torch.device) -> int | None:
    inputs = make()
    try:
        return peak_bytes(lambda: forward_backward(fn, inputs), device)
    except Exception:  # the profiler unavailable (e.g. already running): no figure, not 0
        return None


def run(cases: Iterable[BenchCase], repeat: int = 10, warmup: int = 2, quick: bool = False,
        progress: Callable[[str], None] | None = None, modes: Sequence[str] = ("eager",),
        device: str | torch.device = "cpu", peak: bool = True) -> dict[str, Any]:
    """Run ``cases`` in order, each in every mode, and return the full JSON-ready report.

    Args:
        cases: from :func:`gradsmith.bench.registry` (or built for user Functions).
        repeat: timed runs per side.
        warmup: untimed runs per side.
        quick: small inputs (seconds for the whole registry).
        progress: optional callable ``(label) -> None`` called before each case and mode.
        modes: ``"eager"`` and/or ``"compiled"``.
        device: ``"cpu"`` or a CUDA device.
        peak: measure peak memory too.

    Example:
        >>> from gradsmith.bench import registry
        >>> report = run([registry()["logsumexp"]], repeat=2, warmup=1, quick=True)
        >>> report["results"][0]["op"], report["results"][0]["saved_bytes"]["reference"]
        ('logsumexp', 262400)
    """
    device = check_device(device)
    results = []
    for case in cases:
        for mode in modes:
            if progress is not None:
                progress(f"{case.name} ({mode})")
            results.append(run_case(case, repeat=repeat, warmup=warmup, quick=quick,
                                    mode=mode, device=device, peak=peak))
    return report_of(results, repeat=repeat, warmup=warmup, quick=quick, device=device)


def report_of(results: list[dict[str, Any]], *, repeat: int, warmup: int, quick: bool,
              device: str | torch.device = "cpu") -> dict[str, Any]:
    """Wrap measured rows into a report with the environment (schema :data:`SCHEMA_VERSION`)."""
    return {"schema": SCHEMA_VERSION, "environment": environment(device), "repeat": repeat,
            "warmup": warmup, "quick": quick, "results": results}
