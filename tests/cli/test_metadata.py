"""The distribution says who makes it and what it is for (issue 21: no authors, no
classifiers). Read from pyproject.toml, the single source of the wheel's metadata."""

from __future__ import annotations

import tomllib
from pathlib import Path

PROJECT = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())[
    "project"]


def test_authors_keywords_and_classifiers():
    assert PROJECT["authors"] and all(a.get("name") for a in PROJECT["authors"])
    assert "autograd" in PROJECT["keywords"]
    classifiers = PROJECT["classifiers"]
    assert {"Framework :: Pytest", "Framework :: Flake8", "Typing :: Typed"} <= set(classifiers)
    # The Python classifiers say what requires-python and CI say (3.11, nothing older).
    versions = [c.rsplit(" :: ", 1)[1] for c in classifiers
                if c.startswith("Programming Language :: Python :: 3.")]
    assert versions == ["3.11"] and PROJECT["requires-python"] == ">=3.11"
    # A license expression excludes License :: classifiers (PEP 639; setuptools refuses both).
    assert PROJECT["license"] == "MIT" and not [c for c in classifiers
                                                if c.startswith("License ::")]
