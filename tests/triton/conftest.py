"""Triton tests run only where triton is installed (``pip install 'gradsmith[triton]'``).

Without a GPU the kernels run in Triton's interpreter: :func:`gradsmith._triton.prepare` is
called here, before ``kernels`` is imported, exactly as ``gradsmith check`` does it before user
code loads.
"""

import sys
from pathlib import Path

import pytest

pytest.importorskip("triton", reason="needs triton: pip install 'gradsmith[triton]'")
pytest.importorskip("numpy", reason="Triton's interpreter needs numpy")

from gradsmith._triton import prepare  # noqa: E402

prepare()

HERE = str(Path(__file__).parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
