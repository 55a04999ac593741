"""A forward whose code proves it can never return is a FAIL naming the line, not a skip.

``return output.clone()`` with ``output`` bound nowhere raises ``NameError`` on every call that
gets that far; the statements before it can only raise. Synthesis found no input on which forward
runs (the mode check before raised on its guesses) and the row was a skip blaming the inputs
(corpus 13 held-out: bandlimited-cnns noise_Conv2dFunction2; ViTALiTy FakeWeight reads
``prec_sf`` in an ``if`` test every call reaches). Reduced cases written here, each in a module
file of its own (the proof reads the module's source); the reference is calling the Function
on inputs its contract allows: it raises the error the finding names. A name some input, the
module or the project may define stays what it was.
"""

from __future__ import annotations

import importlib.util
import json
import textwrap

import pytest
import torch

import gradsmith
from gradsmith.discovery.never_returns import never_returns

HEADER = "import torch\nfrom torch.autograd import Function\n\n\n"

UNDEFINED_AT_END = '''
class Noisy(Function):
    @staticmethod
    def forward(ctx, x, std, kind):
        x = x.clone()
        ctx.save_for_backward(x)
        if std > 0:
            if kind == "gauss":
                x += torch.randn_like(x) * std
            else:
                raise ValueError(f"unknown kind {kind}")
        return output.clone()

    @staticmethod
    def backward(ctx, g):
        return g, None, None
'''

UNDEFINED_IN_TEST = '''
class Fake(Function):
    @staticmethod
    def forward(ctx, x, bits=None):
        with torch.no_grad():
            out = x.clone()
            if bits is None:
                bits = 8
            if scale_factor is not None:
                bits = bits * scale_factor
            out = torch.round(out * 2 ** bits) / 2 ** bits
        return out

    @staticmethod
    def backward(ctx, g):
        return g, None
'''

UNBOUND_LOCAL = '''
class Accumulate(Function):
    @staticmethod
    def forward(ctx, x):
        total = total + x
        return total

    @staticmethod
    def backward(ctx, g):
        return g
'''

#: Forwards that may return, or names something may define: none is proven to never return.
MAY_RETURN = {
    "early_return": '''
class F(Function):
    @staticmethod
    def forward(ctx, x):
        if x.dim() == 1:
            return x * 2
        return output
''',
    "only_in_a_branch": '''
class F(Function):
    @staticmethod
    def forward(ctx, x, flag=False):
        if flag:
            x = x * missing
        return x * 2
''',
    "second_operand": '''
class F(Function):
    @staticmethod
    def forward(ctx, x, flag=False):
        if flag and missing:
            x = x * 3
        return x * 2
''',
    "optional_import": '''
try:
    from not_installed_anywhere import helper
except ImportError:
    pass


class F(Function):
    @staticmethod
    def forward(ctx, x):
        return helper(x)
''',
    "set_by_a_function": '''
def configure(value):
    global SCALE
    SCALE = value


class F(Function):
    @staticmethod
    def forward(ctx, x):
        return x * SCALE
''',
    "inside_try": '''
class F(Function):
    @staticmethod
    def forward(ctx, x):
        try:
            y = x * missing
        except NameError:
            y = x * 2
        return y
''',
    "bound_before": '''
class F(Function):
    @staticmethod
    def forward(ctx, x, flag=True):
        if flag:
            total = x
        total = total * 2
        return total
''',
    "in_a_lambda": '''
class F(Function):
    @staticmethod
    def forward(ctx, x):
        scale = lambda: missing
        return x * 2
''',
    "after_a_raise": '''
class F(Function):
    @staticmethod
    def forward(ctx, x):
        with torch.no_grad():
            raise NotImplementedError("subclasses define forward")
        return output
''',
}

FIXED = '''
class Noisy(Function):
    @staticmethod
    def forward(ctx, x, std, kind):
        output = x.clone()
        if std > 0:
            if kind == "gauss":
                output += torch.randn_like(x) * std
            else:
                raise ValueError(f"unknown kind {kind}")
        return output.clone()

    @staticmethod
    def backward(ctx, g):
        return g, None, None


class NoisyWrong(Noisy):
    @staticmethod
    def backward(ctx, g):
        return 2 * g, None, None
'''


def _module(tmp_path, name: str, body: str):
    path = tmp_path / f"{name}.py"
    path.write_text(HEADER + textwrap.dedent(body))
    spec = importlib.util.spec_from_file_location(f"_never_returns_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("body", "cls", "name", "kind", "args"), [
    (UNDEFINED_AT_END, "Noisy", "output", "undefined", (0.0, "gauss")),
    (UNDEFINED_IN_TEST, "Fake", "scale_factor", "undefined", (4,)),
    (UNBOUND_LOCAL, "Accumulate", "total", "unbound", ()),
], ids=["return-reads-undefined", "if-test-reads-undefined", "unbound-local"])
def test_the_read_is_found_and_every_valid_call_raises_it(tmp_path, body, cls, name, kind, args):
    fn = getattr(_module(tmp_path, cls.lower(), body), cls)
    found = never_returns(fn)
    assert found is not None and found["name"] == name and found["kind"] == kind, found
    for shape in ((3,), (2, 5), ()):  # the reference: the Function itself, on valid inputs
        x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
        with pytest.raises(NameError, match=name) as info:
            fn.apply(x, *args)
        assert info.traceback[-1].lineno + 1 == found["line"]  # pytest's are 0-based
    lines = (tmp_path / f"{cls.lower()}.py").read_text().splitlines()
    assert found["line"] == next(n for n, text in enumerate(lines, 1) if name in text)


@pytest.mark.parametrize("case", sorted(MAY_RETURN))
def test_a_forward_that_may_return_or_a_name_that_may_exist_is_not_proven(tmp_path, case):
    assert never_returns(_module(tmp_path, case, MAY_RETURN[case]).F) is None


def test_the_fixed_function_passes_and_a_planted_wrong_backward_fails(tmp_path):
    module = _module(tmp_path, "fixed", FIXED)
    assert never_returns(module.Noisy) is None and never_returns(module.NoisyWrong) is None
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    assert gradsmith.check(module.Noisy, x, 0.0, "gauss", compat=False).passed
    report = gradsmith.check(module.NoisyWrong, x, 0.0, "gauss", compat=False)
    assert report.verdict == "FAILED", report  # 2g: a gradient mismatch (estimator-shaped)
    assert report.codes("error") & {"gradient-mismatch", "undeclared-estimator"}, report


def test_the_command_line_row_fails_naming_the_line(tmp_path, monkeypatch, capsys,
                                                    warm_worker_template):
    from gradsmith.cli import main

    (tmp_path / "noisy.py").write_text(HEADER + textwrap.dedent(UNDEFINED_AT_END))
    monkeypatch.chdir(tmp_path)
    code = main(["check", "noisy.py::Noisy", "--format", "json", "--timeout", "120"])
    (row,) = json.loads(capsys.readouterr().out)["results"]
    assert code != 0
    assert row["verdict"] == "fail" and row["error"] is None, row
    (finding,) = row["report"]["findings"]
    assert finding["code"] == "forward-error" and finding["severity"] == "error"
    assert finding["details"]["cause"] == "never-returns"
    line = (HEADER + textwrap.dedent(UNDEFINED_AT_END)).splitlines().index(
        "        return output.clone()") + 1
    assert f"noisy.py:{line}" in finding["message"] and "'output'" in finding["message"], finding
