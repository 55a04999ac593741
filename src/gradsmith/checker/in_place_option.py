"""A further input set that sets the Function's own in-place option (private).

Synthesis checks further input sets with a flag flipped from forward's default. A rotary
embedding offering ``in_place=True`` (corpus 13d's DeepLinkExt ``ApplyRotaryEmbTorch``) writes
its result into ``x`` and its gradient into ``grad_output`` on that set, by design and as its
option says; as errors they turned a correct Function into a FAIL on an option the caller must
ask for.

:func:`asked_in_place` makes those mutation errors warnings only where the flipped
parameter's name says in place (``in_place``, ``inplace``) and it was turned on, the first set
(option off) raised no error, and the further set's only errors are the writes the option asks
for (``input-mutated``, ``grad-output-mutated``): its gradient still held. Any other error on
that set (a wrong gradient in place mode) stands, and so does every mutation with the option
off.
"""

from __future__ import annotations

from typing import Any

# The writes an in-place option asks for: its result into the input, its gradient into
# grad_output.
_ASKED = frozenset({"input-mutated", "grad-output-mutated"})


def asked_in_place(obj: Any, first: tuple, args: tuple, first_report: Any, report: Any) -> bool:
    """Turn ``report``'s asked-for mutation errors into warnings (see the module); True where
    it did."""
    errors = [f for f in report.findings if f.is_error]
    if not errors or any(f.code not in _ASKED for f in errors) or first_report.errors:
        return False
    if not isinstance(obj, type) or len(first) != len(args):
        return False
    from gradsmith.discovery.source import forward_parameters

    names = forward_parameters(obj)
    flag = [names[i] for i, (a, b) in enumerate(zip(first, args))
            if i < len(names) and b is True and a in (False, None)
            and names[i].replace("_", "").lower() == "inplace"]
    if not flag:
        return False
    for f in errors:
        f.severity = "warning"
        f.message += (f" ({flag[0]}=True asks for this write: the option's purpose; autograd "
                      "is not told of it, so keep the option off where another op saved "
                      "the tensor)")
    return True
