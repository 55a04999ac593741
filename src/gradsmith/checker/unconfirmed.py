"""The finding of a gradient error that arose only on a guessed input (private).

See :mod:`gradsmith.checkrun.guesses`, which re-checks a synthesised row's errors on another
candidate for the arguments that were guesses: where the Function passes there, the errors are
not shown to be the Function's, and this warning makes the verdict INCOMPLETE.
"""

from __future__ import annotations

from gradsmith.checker.report import Finding


def unconfirmed(changed: dict[str, tuple[str, str]], codes: list[str],
                source: str = "") -> Finding:
    """``unconfirmed-guess``: ``codes`` arose where each argument of ``changed`` was its first
    guess, and the Function passes where it is its second (``name -> (first, second)``);
    ``source`` says where that candidate comes from when it is the project's own inputs."""
    names = ", ".join(changed)
    said = "; ".join(f"{n}: {was} -> {now}" for n, (was, now) in changed.items())
    where = (f"on the project's own inputs, {source} ({said}), the Function passes the "
             "gradient checks: a FAIL must hold on the inputs the code is written for"
             if source else f"on another candidate ({said}) the Function passes the "
             "gradient checks")
    return Finding(
        "unconfirmed-guess", "warning",
        f"{', '.join(codes)} arose only on a guess: nothing in the Function states what "
        f"{names} {'is' if len(changed) == 1 else 'are'}, and {where}. The error is not "
        "shown to be the Function's; the verdict is INCOMPLETE",
        f"register an example with a real {names} (@gradsmith.example) so that the check "
        "does not have to guess",
        "gradients", next(iter(changed)),
        {"incomplete": True, "changed": {n: list(v) for n, v in changed.items()},
         "codes": list(codes)})
