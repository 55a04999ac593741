"""State shared by the checks of one ``check`` call (data flows engine -> checks -> report)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from gradsmith.checker import rng
from gradsmith.checker.numerics import Settings
from gradsmith.checker.problem import Problem
from gradsmith.checker.report import Finding, Report
from gradsmith.checker.subject import Subject


class Skip(Exception):  # noqa: N818 - control flow, not an error
    """Raised by a check that does not apply; the message is the reason.

    ``relies_on`` names the check that judges the property instead (the gradients check
    skipped for a declared surrogate relies on the surrogate check): unless that one runs to
    the end, the property is unverified and the report is INCOMPLETE.
    """

    def __init__(self, reason: str, relies_on: str | None = None):
        super().__init__(reason)
        self.relies_on = relies_on


class Incomplete(Skip):
    """Raised by a check that applies but could not establish its property (could not
    compare, a declaration it needs cannot be evaluated): the report is INCOMPLETE."""


class UserCodeError(Exception):
    """The user's forward or backward raised; carries the finding to report."""

    def __init__(self, finding: Finding, exc: BaseException | None = None):
        super().__init__(finding.message)
        self.finding = finding
        self.exc = exc  # the user code's own exception, when there is one


@dataclass
class Options:
    atol: float = 1e-5
    rtol: float = 1e-3
    approximate: bool = False
    max_relative_error: float = 1e-2
    min_cosine: float = 0.99
    unbiased: bool = False  # backward is random by design; judged by the mean of its draws
    seed: int = 0
    exact_max: int = 1000
    user_tolerance: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Session:
    subject: Subject
    options: Options
    report: Report
    surrogate: Any = None
    intended: Any = None
    settings: Settings = field(default_factory=Settings)
    cache: dict[str, Any] = field(default_factory=dict)

    def generator(self, salt: int = 0) -> torch.Generator:
        return rng.generator(self.options.seed * 1000 + salt)

    @property
    def problem(self) -> Problem:
        if "problem" not in self.cache:
            self.cache["problem"] = self.subject.problem()
        return self.cache["problem"]

    @property
    def function_cls(self) -> type | None:
        return self.subject.target.function_cls


def backward_error(exc: BaseException, check: str, cls: type | None = None) -> UserCodeError:
    return UserCodeError(_explained(
        exc, check, cls, "backward", ("backward-error", "error"),
        "make backward return one gradient per forward input, each shaped like its input; "
        "run the Function by hand with the same inputs to see the traceback"), exc)


def forward_error(exc: BaseException, check: str, cls: type | None = None) -> UserCodeError:
    return UserCodeError(_explained(
        exc, check, cls, "forward", ("forward-error", "error"),
        "check that the example inputs are valid for this Function (shapes, dtypes) and that "
        "forward runs on them"), exc)


def _explained(exc: BaseException, check: str, cls: type | None, where: str,
               kind: tuple[str, str], hint: str) -> Finding:
    """A finding for an exception from user code, explained when autograd raised it."""
    from gradsmith.checker.explain import describe, explain, user_frame

    frame = user_frame(exc, cls, where)
    text = " ".join(str(exc).split())
    text = text if len(text) <= 400 else text[:400] + " ..."
    message = f"{where} raised {type(exc).__name__}: {text}{describe(frame)}"
    details: dict[str, Any] = {"exception": type(exc).__name__}
    if frame:
        details["where"] = frame
    code, severity = kind
    from gradsmith.checker import invented

    if (stand_in := invented.invented_cause(exc)) is not None:  # the inputs', not the code's
        return invented.finding(exc, where, check, stand_in, message, details)
    from gradsmith.checker import unset_globals

    if (unset := unset_globals.unset_global(exc)) is not None:  # the training script's setup
        return unset_globals.finding(exc, where, check, unset, message, details)
    known = explain(exc, where)
    if known is not None:
        message += f". Cause: {known.cause}"
        hint = known.fix
        code = known.code or code
        details["cause"] = known.key
    return Finding(code, severity, message, hint, check, details=details)
