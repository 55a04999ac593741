"""The corpus is data for test_corpus.py, not a test module of its own."""

import sys
from pathlib import Path

collect_ignore = ["corpus"]

HERE = str(Path(__file__).parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
