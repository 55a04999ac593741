"""The verifier behind ``gradsmith check``: one module per property, one :func:`check` API.

Public names: :func:`check`, :class:`Report`, :class:`Finding`, :data:`CHECK_NAMES`.
"""

from gradsmith.checker.engine import CHECK_NAMES, check
from gradsmith.checker.report import Finding, Report

__all__ = ["CHECK_NAMES", "Finding", "Report", "check"]
