"""This folder's shared helpers (``source_cases.py``) are importable by name, as tests/checker's are."""

import sys
from pathlib import Path

HERE = str(Path(__file__).parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
