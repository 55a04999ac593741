"""The gradient reversal Module and the DANN schedule for its strength."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from gradsmith._errors import GradsmithError
from gradsmith.ops._estimators import grad_reverse
from gradsmith.ops._validate import check_number


def dann_schedule(progress: float, gamma: float = 10.0) -> float:
    """DANN's reversal strength ``2 / (1 + exp(-gamma * p)) - 1`` for training progress ``p``.

    Rises smoothly from 0 at ``p = 0`` (the domain classifier's early, noisy gradient is
    suppressed) to about 1 at ``p = 1``.

    Args:
        progress: fraction of training done, in ``[0, 1]``.
        gamma: steepness (10 in the paper), a finite number > 0.

    Returns:
        The strength ``alpha`` for :func:`grad_reverse`.

    Raises:
        GradsmithError: if ``progress`` is outside ``[0, 1]`` or ``gamma <= 0``.

    Example:
        >>> from gradsmith.functional import dann_schedule
        >>> [round(dann_schedule(p), 4) for p in (0.0, 0.1, 1.0)]
        [0.0, 0.4621, 0.9999]

    References:
        Ganin & Lempitsky, "Unsupervised Domain Adaptation by Backpropagation", ICML 2015.
    """
    progress = check_number("dann_schedule", "progress", progress)
    gamma = check_number("dann_schedule", "gamma", gamma)
    if not 0.0 <= progress <= 1.0:
        raise GradsmithError(
            f"dann_schedule: progress must be in [0, 1], got {progress}; pass "
            f"step / total_steps"
        )
    if gamma <= 0:
        raise GradsmithError(f"dann_schedule: gamma must be > 0, got {gamma}")
    return 2.0 / (1.0 + math.exp(-gamma * progress)) - 1.0


class GradientReversal(nn.Module):
    """Gradient reversal layer with a fixed strength or one that follows a schedule.

    Args:
        alpha: a number >= 0, or a schedule ``progress -> alpha`` such as
            :func:`dann_schedule`; call :meth:`set_progress` as training advances.

    Example:
        >>> from gradsmith.nn import GradientReversal
        >>> from gradsmith.functional import dann_schedule
        >>> layer = GradientReversal(alpha=dann_schedule)
        >>> layer
        GradientReversal(alpha=dann_schedule)
        >>> layer.set_progress(0.1)
        >>> round(layer.alpha, 4)
        0.4621
    """

    def __init__(self, alpha: float | Callable[[float], float] = 1.0) -> None:
        super().__init__()
        if callable(alpha):
            self.schedule: Callable[[float], float] | None = alpha
            self.progress = 0.0
            self._check_alpha(alpha(0.0))
        else:
            self.schedule = None
            self._alpha = self._check_alpha(alpha)

    @staticmethod
    def _check_alpha(value: float) -> float:
        value = check_number("GradientReversal", "alpha", value)
        if value < 0:
            raise GradsmithError(
                f"GradientReversal: alpha must be >= 0, got {value}; the layer already "
                f"negates the gradient"
            )
        return value

    @property
    def alpha(self) -> float:
        """Current strength: the fixed value, or the schedule at the current progress."""
        if self.schedule is None:
            return self._alpha
        return self._check_alpha(self.schedule(self.progress))

    def set_progress(self, progress: float) -> None:
        """Set training progress in ``[0, 1]`` (used by a schedule; ignored for a fixed alpha)."""
        progress = check_number("GradientReversal", "progress", progress)
        if not 0.0 <= progress <= 1.0:
            raise GradsmithError(
                f"GradientReversal: progress must be in [0, 1], got {progress}; pass "
                f"step / total_steps"
            )
        self.progress = progress

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return grad_reverse(x, self.alpha)

    def extra_repr(self) -> str:
        if self.schedule is None:
            return f"alpha={self._alpha}"
        return f"alpha={getattr(self.schedule, '__name__', repr(self.schedule))}"
