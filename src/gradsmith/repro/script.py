"""Render and write the repro scripts of a ``gradsmith check`` run (see the package docstring)."""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

from gradsmith.repro._loader import loader as _loader
from gradsmith.repro._prelude import PRELUDE
from gradsmith.repro.bodies import BODIES, family

_MODULE_CLASS = '''
class Scaled(torch.nn.Module):
    """The module gradsmith synthesised for a module argument: tanh(y) * weight."""

    def __init__(self, weight):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.tensor(weight, dtype=torch.float64))

    def forward(self, y, *args, **kwargs):
        return torch.tanh(y) * self.weight


class SyntheticFn:
    """The function gradsmith synthesised for a function argument that backward calls:
    tanh(last tensor) * weight + mean(tanh(each other tensor)), summed when reduce."""

    def __init__(self, weight, reduce=False):
        self.weight, self.reduce = weight, reduce

    def __call__(self, *args, **kwargs):
        t = [a for a in args if isinstance(a, torch.Tensor)]
        out = torch.tanh(t[-1]) * self.weight + sum(torch.tanh(a).mean() for a in t[:-1])
        return out.sum() if self.reduce else out
'''


_UNPICKLE = '''

def _unpickle(module_name, data):
    """A module argument as torch.save wrote it; its class is looked up in the module that
    defined it, which may be the user's file (imported above under another name)."""
    import base64
    import io

    if module_name not in sys.modules and module_name.startswith("gradsmith_target_"):
        sys.modules[module_name] = sys.modules.get("user_module")
    return torch.load(io.BytesIO(base64.b64decode(data)), weights_only=False)
'''


def write_scripts(directory: str | Path, rows: list[dict]) -> list[Path]:
    """Write one script per error finding of every failing row that carries a repro record.

    File names are unique within the run: two targets whose short names agree (``ops.py::Fn``
    in two packages) get the longer name, or a number, so no script replaces another and the
    count returned is the number of files written.

    Args:
        directory: where to write (created if missing).
        rows: rows of a check run (``CheckRun.rows``).

    Returns:
        The paths written, in row order.
    """
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    taken: set[str] = set()  # lower case: one file on a case-insensitive file system
    for r in rows:
        repro = r.get("repro")
        if r.get("verdict") != "fail" or not repro or not r.get("report"):
            continue
        seen: set[tuple] = set()
        for finding in r["report"]["findings"]:
            if finding["severity"] != "error":
                continue
            set_index = int(finding.get("details", {}).get("input_set", 0) or 0)
            key = (finding["code"], finding.get("input"), set_index)
            if key in seen:
                continue
            seen.add(key)
            name = _unique_name(r["name"], finding, set_index, taken)
            path = out / f"{name}.py"
            path.write_text(render_script(repro, finding, set_index, r["name"],
                                          side_file=path.with_suffix(".pt")),
                            encoding="utf-8")
            written.append(path)
    return written


def _unique_name(row_name: str, finding: dict, set_index: int, taken: set[str]) -> str:
    """``<row>__<code>__<input>[__setN]``: the row without its folders when that is free, else
    with them, else with a number; the name is added to ``taken``."""
    tail = [finding["code"], finding.get("input"), f"set{set_index}" if set_index else None]
    short = row_name.rsplit("/", 1)[-1]  # file.py::Fn[example], without the folders
    candidates = ["__".join(_safe(p) for p in (row, *tail) if p) for row in (short, row_name)]
    name = next((c for c in candidates if c.lower() not in taken), None)
    number = 2
    while name is None:
        name = f"{candidates[0]}__{number}"
        name = None if name.lower() in taken else name
        number += 1
    taken.add(name.lower())
    return name


def render_script(repro: dict, finding: dict, set_index: int = 0, row_name: str = "",
                  side_file: Path | None = None) -> str:
    """The text of one standalone script that replays ``finding`` on input set ``set_index``.

    Tensors larger than :data:`INLINE_IN_SCRIPT` elements are saved with ``torch.save`` to
    ``side_file`` (when given) and loaded by the script, instead of written as literals.
    """
    sets = repro["sets"]
    chosen = sets[min(set_index, len(sets) - 1)]
    details = finding.get("details") or {}
    elements = [e[0] if isinstance(e, list) else e for e in details.get("elements", [])
                if isinstance(e, (int, list))]
    nan_elements = elements if finding["code"].startswith("nan-") else []
    reported = {e[0]: (e[1], e[2]) for e in details.get("elements", [])
                if isinstance(e, list) and len(e) == 3}
    body = BODIES[family(finding["code"], finding.get("check", ""))]
    side: list = []
    args_text, needs_module = _make_args(chosen["args"], side if side_file else None)
    if side:
        import torch

        torch.save([torch.tensor(values, dtype=getattr(torch, dtype)).reshape(shape)
                    for values, dtype, shape in side], side_file)
        args_text = (f"side = torch.load(os.path.join(HERE, {side_file.name!r}))  # the larger "
                     "tensors, exact\n" + args_text)
    here = side_file.parent if side_file is not None else None
    prelude = PRELUDE.format(seed=int(repro.get("seed", 0)),
                             loader=_loader(repro["source"], here),
                             names=list(chosen.get("names", [])),
                             ties=[tuple(t) for t in chosen.get("ties", [])],
                             make_args=textwrap.indent(args_text, "    "))
    header = _header(row_name, finding, str(chosen.get("label", "")))
    # names and messages as the script prints them: escapes shown, never obeyed by a terminal
    constants = (f"\nFN_NAME = {_shown(row_name)!r}\nCODE = {finding['code']!r}\n"
                 f"INPUT = {finding.get('input')!r}\nELEMENTS = {elements[:64]!r}\n"
                 f"NAN_ELEMENTS = {nan_elements[:64]!r}\nREPORTED = {reported!r}\n"
                 f"MESSAGE = {_shown(finding['message'])!r}\n"
                 f"EXCEPTION = {details.get('exception')!r}\n")
    module_class = (_MODULE_CLASS if needs_module else "") + _UNPICKLE
    text = header + prelude.replace(
        "\nFN = load()", module_class + "\nFN = load()") + constants + body
    return text


#: The first line of every script: ``gradsmith check DIR`` leaves files that start with it alone.
MARKER = "# gradsmith-repro: generated"


def _header(row_name: str, finding: dict, label: str) -> str:
    """The marker line, a fixed docstring, and what gradsmith reported as comments: user text
    (names, exception messages) only ever in comments, shown with ``repr``'s escapes, so no
    quote, backslash or line break in it can end the comment or become code."""
    where = f" [{finding['input']}]" if finding.get("input") else ""
    message = textwrap.wrap(_shown(finding["message"]), 92, break_long_words=False,
                            break_on_hyphens=False) or [""]
    lines = [MARKER,
             '"""Reproduce a gradsmith finding with plain PyTorch (this script never imports '
             "gradsmith).",
             "",
             "Run `python this_file.py`: it prints the same numbers and ends with REPRODUCED "
             "(exit 0)",
             "or NOT REPRODUCED (exit 3). The finding is in the comments below.",
             '"""',
             f"# {_shown(row_name)}: {_shown(finding['code'] + where)} on inputs "
             f"{_shown(label)}",
             "# gradsmith reported:",
             *(f"#     {line}" for line in message)]
    return "\n".join(lines) + "\n"


def _shown(text: str) -> str:
    """``text`` as ``repr`` shows it, without the quotes: one line, every escape visible."""
    return repr(str(text))[1:-1]


INLINE_IN_SCRIPT = 4096


def _make_args(specs: list[dict], side: list | None = None) -> tuple[str, bool]:
    needs_module = False
    lines = []
    names = []
    for i, spec in enumerate(specs):
        expr, uses_module = _expr(spec, side)
        needs_module |= uses_module
        names.append(f"a{i}")
        lines.append(f"a{i} = {expr}")
    tail = ", ".join(names) + ("," if len(names) == 1 else "")
    return "\n".join(lines + [f"return ({tail})"]), needs_module


def _expr(spec: dict, side: list | None = None) -> tuple[str, bool]:
    kind = spec["type"]
    if kind == "tensor":
        dtype = f"torch.{spec['dtype']}"
        if spec.get("values") is None:
            return (f"(_ for _ in ()).throw(SystemExit('the values of this {spec['shape']} "
                    "tensor were not recorded (too large); pass it yourself'))", False)
        if side is not None and len(spec["values"]) > INLINE_IN_SCRIPT:
            side.append(([_parser(v)(v) if isinstance(v, str) else v for v in spec["values"]],
                         spec["dtype"], tuple(spec["shape"])))
            grad = ".requires_grad_(True)" if spec.get("requires_grad") else ""
            return f"side[{len(side) - 1}].clone(){grad}", False
        values = ", ".join(_number(v) for v in spec["values"])
        wrapped = textwrap.fill(values, 96, subsequent_indent="    ", break_long_words=False,
                                break_on_hyphens=False)
        expr = f"torch.tensor([{wrapped}], dtype={dtype}).reshape({tuple(spec['shape'])!r})"
        if spec.get("layout"):  # checked on its stored values, as gradsmith does
            expr = f"sparse_values({expr}, {spec['layout']!r})"
        if spec.get("requires_grad"):
            expr += ".requires_grad_(True)"
        return expr, False
    if kind == "module":
        return f"Scaled({spec['weight']!r})", True
    if kind == "function":
        return f"SyntheticFn({spec['weight']!r}, reduce={spec['reduce']!r})", True
    if kind in ("list", "tuple"):
        parts = [_expr(s, side) for s in spec["items"]]
        inner = ", ".join(p for p, _ in parts)
        uses = any(u for _, u in parts)
        if kind == "tuple":
            return f"({inner}{',' if len(parts) == 1 else ''})", uses
        return f"[{inner}]", uses
    if kind == "namespace":  # an object with these attributes, no import needed
        parts = {k: _expr(s, side) for k, s in spec["items"].items()}
        inner = ", ".join(f"{k!r}: {_static(p, s)}" for (k, (p, _)), s in
                          zip(parts.items(), spec["items"].values()))
        return f"type('Config', (), {{{inner}}})()", any(u for _, u in parts.values())
    if kind == "identity":
        return "(lambda t, *a, **k: t)", False
    if kind == "dict":
        parts = {k: _expr(s, side) for k, s in spec["items"].items()}
        inner = ", ".join(f"{k!r}: {p}" for k, (p, _) in parts.items())
        return "{" + inner + "}", any(u for _, u in parts.values())
    if kind == "value":
        return (spec["repr"] if _is_literal(spec["repr"]) else "None"), False
    if kind == "pickled":  # a module, saved with torch.save; its class comes from its module
        return f"_unpickle({spec['module']!r}, {spec['data']!r})", False
    return "None", False  # an opaque object (a user's module...): not recordable


def _static(expr: str, spec: dict) -> str:
    """A function as a class attribute stays a plain function on the instance."""
    return f"staticmethod{expr}" if spec["type"] == "identity" else expr


# What capture_value writes for plain values besides Python literals.
_NON_FINITE = re.compile(r"float\('(-?inf|nan)'\)")
_DTYPE = re.compile(r"torch\.[A-Za-z_][A-Za-z0-9_]*")


def _is_literal(text: str) -> bool:
    """Whether ``text`` is safe to paste into the script as an expression: a Python literal
    (``repr`` of None, a bool, int or str), ``float('nan')`` or a ``torch.<dtype>``. A str
    subclass's own ``__repr__`` is not: it could be any code."""
    if _NON_FINITE.fullmatch(text) or _DTYPE.fullmatch(text):
        return True
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    return value is None or type(value) in (bool, int, float, str)


def _number(v) -> str:
    if isinstance(v, str):
        return f"{_parser(v).__name__}({v!r})"
    return repr(v)


def _parser(text: str) -> type:
    """``complex`` or ``float``: what reads back a number capture recorded as text
    (``"(1+2j)"``, ``"nan"``, ``"inf"``)."""
    return complex if text.rstrip(")").endswith("j") else float


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", str(text)).strip("_")[:80]
