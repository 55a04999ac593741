"""The verifier behind ``gradsmith check``: one module per property, one :func:`check` API.

Public names: :func:`check`, :class:`Report`, :class:`Finding`, :data:`CHECK_NAMES`.
"""

from gradsmith._requires import require_torch

require_torch("the verifier (gradsmith.check)")

from gradsmith.checker.engine import CHECK_NAMES, check  # noqa: E402
from gradsmith.checker.report import Finding, Report  # noqa: E402

__all__ = ["CHECK_NAMES", "Finding", "Report", "check"]
