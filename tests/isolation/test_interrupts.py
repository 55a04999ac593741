"""A Function raising ``KeyboardInterrupt`` is that Function's failure, also when it runs in
gradsmith's own process (``--no-isolate``): the other Functions are still checked (issue 20)."""

from __future__ import annotations

INTERRUPTS = """
@gradsmith.example(_x)
class Interrupts(Function):
    @staticmethod
    def forward(ctx, x):
        raise KeyboardInterrupt("from forward")

    @staticmethod
    def backward(ctx, grad):
        return grad
"""


def test_keyboard_interrupt_in_process_fails_only_its_function(runner, write, procs):
    write("a_interrupts.py", INTERRUPTS)
    write("b_good.py", procs.good)
    code, doc, err = runner.check(".", "--no-isolate", "--no-compat")
    rows = {r["name"]: r for r in doc["results"]}
    assert set(rows) == {"a_interrupts.py::Interrupts", "b_good.py::Square", "b_good.py::Exp"}
    bad = rows["a_interrupts.py::Interrupts"]
    assert (bad["verdict"], bad["error"]) == ("fail", "exception"), err
    assert "the Function raised KeyboardInterrupt: from forward at " in bad["reason"]
    assert "a_interrupts.py" in bad["reason"]
    assert rows["b_good.py::Square"]["verdict"] == rows["b_good.py::Exp"]["verdict"] == "pass"
    assert code == 1
