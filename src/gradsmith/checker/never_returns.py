"""The finding for a forward that can never return, shown without running it (private).

Where synthesis found no input on which forward runs, a skip blames the inputs. When forward's
own code proves that no call can return (:func:`gradsmith.discovery.never_returns.never_returns`:
a statement every call reaches reads a name defined nowhere), that is the Function's crash,
met by every user on every input: the row is a FAIL with one ``forward-error`` naming the line,
and no input set (none could change it).
"""

from __future__ import annotations

from typing import Any

from gradsmith.checker.explain import describe
from gradsmith.checker.report import Finding, Report


def never_returns_report(obj: Any, name: str) -> Report | None:
    """A report with the ``forward-error`` of a forward that never returns, or None where its
    code does not prove it."""
    from gradsmith.discovery.never_returns import name_explanation, never_returns

    if (found := never_returns(obj)) is None:
        return None
    cause, fix = name_explanation(found)
    exception = "NameError" if found["kind"] == "undefined" else "UnboundLocalError"
    where = {k: found[k] for k in ("file", "line", "function", "code")}
    message = (f"forward raises {exception} on every call: name '{found['name']}' is not "
               f"defined{describe(where)}. Cause: {cause}")
    finding = Finding("forward-error", "error", message, fix, "setup",
                      details={"exception": exception, "where": where,
                               "cause": "never-returns"})
    return Report(name=name, findings=[finding],
                  skipped={"gradients": "forward never returns: nothing to compare"})
