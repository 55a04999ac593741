"""Small patches for gaps in Triton's interpreter that real kernels run into.

Each shim first *probes* whether its gap is present in the installed Triton and patches only
then, so a Triton that closes a gap is left alone. Tested (``tests/triton`` under the
interpreter) against Triton 3.9.0, the newest release and the one torch 2.15 pins, and 3.6.0,
the one torch 2.11's CUDA build pins (the CPU build of torch 2.13 pins none). Versions before
3.0 are not supported: :func:`apply` reports them and patches nothing (kernels then run as
Triton runs them).

The gaps:

- ``float-args``: a Python float kernel argument stays a Python float in the interpreter, so a
  kernel calling ``eps.to(tl.float32)`` fails with ``'float' object has no attribute 'to'``.
  Compiled Triton passes it as an fp32 scalar; the shim does the same.
- ``libdevice``: ``triton.language.extra.libdevice`` is a stub module (every body ``...``)
  that compiled Triton swaps for the backend's; the interpreter does not, so ``tanh``,
  ``rsqrt``, ... return None (and the backend modules' ``extra.cuda.libdevice.tanh`` raise).
  The shim gives them numpy implementations (in the argument's own dtype, like the device
  functions).
- ``autotune``: ``@triton.autotune`` times each config through the GPU driver ("0 active
  drivers"). Timing is meaningless in the interpreter: the shim takes the first config (after
  the autotuner's own pruning), which runs the same kernel code.
- ``bounds``: a guard, not a gap: loads and stores outside the launch's tensors raise
  :class:`OutOfBounds` instead of reading garbage or corrupting memory.
- ``bf16-casts``: casts between bfloat16 and types other than float32 reinterpret raw bits
  in the interpreter; the shim goes through float32.
- ``device-queries``: ``torch.cuda.get_device_capability()`` answers (8, 0) without CUDA,
  for host code that picks kernel configs by GPU generation (speed, not results).
- ``imported-early``: Triton imported before the variable was set leaves its own device
  functions (``tl.sum``, ...) in compiled mode, uncallable from interpreted kernels; the shim
  runs them interpreted. (User kernels must still be imported after :func:`gradsmith._triton.
  prepare`, which ``gradsmith check`` guarantees.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

SUPPORTED = ">=3.0"
TESTED = ("3.9.0",)

_MARK = "__gradsmith_shim__"

# libdevice name -> numpy function (elementwise, float in, same float dtype out).
_UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "tanh": np.tanh, "sqrt": np.sqrt, "sqrt_rn": np.sqrt, "exp": np.exp, "exp2": np.exp2,
    "expm1": np.expm1, "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p,
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos,
    "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh,
    "acosh": np.arccosh, "atanh": np.arctanh, "floor": np.floor, "ceil": np.ceil,
    "trunc": np.trunc, "round": np.round, "rint": np.rint, "nearbyint": np.rint,
    "abs": np.abs, "fabs": np.abs, "cbrt": np.cbrt,
    "rsqrt": lambda x: 1 / np.sqrt(x), "rsqrt_rn": lambda x: 1 / np.sqrt(x),
    "rcp_rn": lambda x: 1 / x, "fast_expf": np.exp, "fast_logf": np.log,
    "fast_tanhf": np.tanh, "exp10": lambda x: np.power(10, x),
    "erf": np.vectorize(lambda v: __import__("math").erf(v), otypes=[np.float64]),
    "erfc": np.vectorize(lambda v: __import__("math").erfc(v), otypes=[np.float64]),
    "isnan": np.isnan, "isinf": np.isinf, "isfinited": np.isfinite, "finitef": np.isfinite,
    "signbit": np.signbit,
}
_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "pow": np.power, "powf": np.power, "fast_powf": np.power, "atan2": np.arctan2,
    "fmod": np.fmod, "fmax": np.fmax, "fmin": np.fmin, "hypot": np.hypot,
    "copysign": np.copysign, "div_rn": np.divide, "fast_dividef": np.divide,
    "nextafter": np.nextafter,
}
_LIBDEVICE_MODULES = ("triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice",
                      "triton.language.extra.hip.libdevice")
_PREDICATES = {"isnan", "isinf", "isfinited", "finitef", "signbit"}


def apply() -> dict[str, str]:
    """Apply every shim whose gap the installed Triton has.

    Returns:
        shim name -> "applied", "not needed" or why it was skipped.
    """
    import triton

    major = int(str(triton.__version__).split(".")[0])
    if major < 3:
        return {name: f"skipped: Triton {triton.__version__} < 3.0 is not supported"
                for name in ("float-args", "libdevice", "autotune", "imported-early", "bounds",
                             "device-queries", "bf16-casts")}
    _count_launches()
    return {"float-args": _float_args(), "libdevice": _libdevice(), "autotune": _autotune(),
            "imported-early": _imported_early(), "bounds": _bounds(),
            "device-queries": _device_queries(), "bf16-casts": _bf16_casts()}


#: Kernel launches run by the interpreter in this process (reports say kernels ran interpreted).
LAUNCHES = [0]


def _count_launches() -> None:
    from triton.runtime import interpreter

    cls = interpreter.GridExecutor
    original = cls.__call__
    if getattr(original, _MARK, False):
        return

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        LAUNCHES[0] += 1
        return original(self, *args, **kwargs)

    setattr(call, _MARK, True)
    cls.__call__ = call


def _float_args() -> str:
    from triton.runtime import interpreter

    original = interpreter._implicit_cvt
    if getattr(original, _MARK, False):
        return "applied"
    if not isinstance(original(0.5), float):
        return "not needed"

    def implicit_cvt(arg: Any) -> Any:
        if isinstance(arg, float):  # compiled Triton passes a Python float as an fp32 scalar
            import triton.language as tl

            handle = interpreter.TensorHandle(np.array([arg], dtype=np.float32), tl.float32)
            return tl.tensor(handle, tl.float32)
        return original(arg)

    setattr(implicit_cvt, _MARK, True)
    interpreter._implicit_cvt = implicit_cvt
    return "applied"


def _libdevice() -> str:
    import importlib

    import triton.language as tl

    patched = 0
    for module_name in _LIBDEVICE_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        for name, fn in [*_UNARY.items(), *_BINARY.items()]:
            stub = getattr(module, name, None)
            if stub is None or getattr(stub, _MARK, False):
                patched += stub is not None
                continue
            # The backend modules' functions are builtins the interpreter cannot call
            # ("_semantic argument must be provided"); the generic module's are stubs.
            if tl.core.is_builtin(stub) or _is_stub(stub):
                setattr(module, name, _elementwise(name, fn))
                patched += 1
    return "applied" if patched else "not needed"


def _is_stub(fn: Any) -> bool:
    """A function whose body is only ``...`` (returns None without looking at its arguments)."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return False
    try:
        return fn(*([None] * code.co_argcount)) is None
    except Exception:  # noqa: BLE001 - a real implementation rejects None: not a stub
        return False


def _elementwise(name: str, fn: Callable[..., np.ndarray]) -> Callable[..., Any]:
    def op(*args: Any, _semantic: Any = None, **_: Any) -> Any:
        import triton.language as tl
        from triton.runtime.interpreter import TensorHandle

        tensors = [a for a in args if isinstance(a, tl.tensor)]
        ref = tensors[0] if tensors else None
        data = [a.handle.data if isinstance(a, tl.tensor) else np.asarray(a) for a in args]
        np_dtype = data[0].dtype if ref is None else ref.handle.data.dtype
        with np.errstate(all="ignore"):
            out = fn(*[d.astype(np_dtype, copy=False) for d in data])
        shape = list(np.broadcast_shapes(*[d.shape for d in data]))
        if name in _PREDICATES:
            scalar, out = tl.int1, np.asarray(out, dtype=np.bool_)
        else:
            scalar, out = ref.dtype if ref is not None else tl.float32, \
                np.asarray(out, dtype=np_dtype)
        block = [t for t in tensors if t.type.is_block()]
        if not block:
            return tl.tensor(TensorHandle(out.reshape(shape), scalar), scalar)
        return tl.tensor(TensorHandle(np.broadcast_to(out, shape).copy(), scalar),
                         tl.block_type(scalar, shape))

    op.__name__ = name
    setattr(op, _MARK, True)
    return op


def _imported_early() -> str:
    """Triton imported before ``TRITON_INTERPRET`` was set (by torch, a test plugin, a
    notebook): its own device functions (``tl.sum``, ``tl.max``, ...) were then made
    compiled-mode ``JITFunction``s, which refuse to be called ("Cannot call @triton.jit'd
    outside of the scope of a kernel"). Calls to them run interpreted instead."""
    import triton.language as tl
    from triton.runtime import interpreter
    from triton.runtime.jit import JITFunction

    if not isinstance(getattr(tl.standard, "sum", None), JITFunction):
        return "not needed"
    original = JITFunction.__call__
    if getattr(original, _MARK, False):
        return "applied"
    interpreted: dict[int, Any] = {}

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        fn = interpreted.get(id(self))
        if fn is None:
            fn = interpreted[id(self)] = interpreter.InterpretedFunction(self.fn)
        return fn(*args, **kwargs)

    setattr(call, _MARK, True)
    JITFunction.__call__ = call
    return "applied"


class OutOfBounds(IndexError):
    """A kernel loaded or stored outside every tensor passed to its launch."""


# Byte ranges (start, end) of the storages of the tensors passed to the running launch.
_RANGES: list[tuple[int, int]] | None = None


def _bounds() -> str:
    """Not a gap but a guard: the interpreter dereferences raw addresses, so a kernel reading
    past its tensors (a bug, or inputs of the wrong shape for host code that checks none)
    returns garbage or corrupts memory, where a GPU would at least fault sometimes. Loads and
    stores are checked against the storages of the launch's tensor arguments and raise
    :class:`OutOfBounds` outside them."""
    from triton.runtime import interpreter

    executor, builder = interpreter.GridExecutor, interpreter.InterpreterBuilder
    if getattr(builder.create_masked_load, _MARK, False):
        return "applied"
    init_args, load, store = (executor._init_args_hst, builder.create_masked_load,
                              builder.create_masked_store)

    def init_args_hst(self: Any, args_dev: Any, kwargs: Any) -> Any:
        global _RANGES
        args_hst, kwargs_hst = init_args(self, args_dev, kwargs)
        _RANGES = _storage_ranges([*args_hst, *kwargs_hst.values()])
        return args_hst, kwargs_hst

    def masked_load(self: Any, ptrs: Any, mask: Any, *args: Any) -> Any:
        _check(ptrs, mask, "load")
        return load(self, ptrs, mask, *args)

    def masked_store(self: Any, ptrs: Any, value: Any, mask: Any, *args: Any) -> Any:
        _check(ptrs, mask, "store")
        return store(self, ptrs, value, mask, *args)

    for fn in (init_args_hst, masked_load, masked_store):
        setattr(fn, _MARK, True)
    executor._init_args_hst = init_args_hst
    builder.create_masked_load, builder.create_masked_store = masked_load, masked_store
    return "applied"


def _storage_ranges(values: list[Any]) -> list[tuple[int, int]] | None:
    ranges: list[tuple[int, int]] = []
    for value in values:
        if isinstance(value, tuple):
            inner = _storage_ranges(list(value))
            if inner is None:
                return None
            ranges += inner
        elif hasattr(value, "untyped_storage"):
            storage = value.untyped_storage()
            ranges.append((storage.data_ptr(), storage.data_ptr() + storage.nbytes()))
        elif hasattr(value, "base") and hasattr(value, "block_shape"):  # TensorDescriptor
            inner = _storage_ranges([value.base])
            if inner is None:
                return None
            ranges += inner
        elif hasattr(value, "data_ptr"):
            return None  # a pointer we cannot bound: check nothing for this launch
    return ranges


def _check(ptrs: Any, mask: Any, what: str) -> None:
    if _RANGES is None:
        return
    addresses = np.broadcast_to(ptrs.data, np.shape(mask.data))[np.asarray(mask.data, bool)]
    if addresses.size == 0:
        return
    size = ptrs.get_element_ty().primitive_bitwidth // 8
    inside = np.zeros(addresses.shape, dtype=bool)
    for lo, hi in _RANGES:
        inside |= (addresses >= lo) & (addresses + size <= hi)
    if not inside.all():
        raise OutOfBounds(
            f"Triton kernel {what}s {int((~inside).sum())} element(s) outside every tensor "
            "passed to the launch (out of bounds): a bug in the kernel's indexing or masks, or "
            "inputs of a shape the host code does not check")


def _bf16_casts() -> str:
    """The interpreter holds bfloat16 as raw 16-bit integers and converts them properly only to
    and from float32; a cast between bfloat16 and any other type (float64, float16, integers)
    reinterprets those integers as numbers: garbage (a float64 gradient accumulated through
    ``x.to(tl.bfloat16)`` comes back NaN). The shim goes through float32, as a GPU does."""
    import triton.language as tl
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    original = builder.cast_impl
    if getattr(original, _MARK, False):
        return "applied"
    handle = interpreter.TensorHandle(np.array([1.5], dtype=np.float64), tl.float64)
    probe = original(builder, original(builder, handle, tl.bfloat16), tl.float64)
    if float(probe.data[0]) == 1.5:
        return "not needed"

    def cast_impl(self: Any, src: Any, dst_type: Any) -> Any:
        src_ty, dst_ty = src.dtype.scalar, dst_type.scalar
        if (src_ty == tl.bfloat16) != (dst_ty == tl.bfloat16) and tl.float32 not in (src_ty,
                                                                                     dst_ty):
            return original(self, original(self, src, tl.float32), dst_type)
        return original(self, src, dst_type)

    setattr(cast_impl, _MARK, True)
    builder.cast_impl = cast_impl
    return "applied"


def _device_queries() -> str:
    """Host code that picks kernel configs by GPU generation calls
    ``torch.cuda.get_device_capability()`` (at import, sometimes), which raises without CUDA.
    With no CUDA device it answers (8, 0), an Ampere GPU: the interpreter runs whatever
    config that selects (pipelining stages, warps and tile sizes change speed, not results)."""
    import torch

    if torch.cuda.is_available():
        return "not needed"
    original = torch.cuda.get_device_capability
    if getattr(original, _MARK, False):
        return "applied"

    def get_device_capability(device: Any = None) -> tuple[int, int]:
        return (8, 0)

    setattr(get_device_capability, _MARK, True)
    torch.cuda.get_device_capability = get_device_capability
    return "applied"


def _autotune() -> str:
    from triton.runtime import autotuner

    cls = autotuner.Autotuner
    if getattr(cls._bench, _MARK, False):
        return "applied"

    def bench(self: Any, *args: Any, config: Any = None, **kwargs: Any) -> list[float]:
        # Equal timings: the autotuner keeps the first of its (pruned) configs.
        return [0.0, 0.0, 0.0]

    setattr(bench, _MARK, True)
    cls._bench = bench
    return "applied"
