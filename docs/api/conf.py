"""Sphinx configuration of gradsmith's API reference (built from the docstrings).

Build: ``python -m sphinx -W --keep-going -b html docs/api build/docs`` (CI runs this; every
warning, such as a malformed docstring or an object that cannot be imported, fails it).

Why Sphinx (autodoc + napoleon) rather than mkdocs + mkdocstrings: the docstrings are Google
style, which napoleon reads as they are; ``-W`` turns every docutils and autodoc warning into
an error with one switch; Sphinx and its dependencies come from this project's package index
with no extra plugins (the ``docs`` extra is just ``sphinx``); and it is what PyTorch's own
reference uses, so the pages look familiar to our users. mkdocs' advantage, rendering the
Markdown guides in docs/ as one site, would need its plugin stack for a reference that is the
part that must track the code; the guides stay Markdown, read on the repository's pages.
"""

from importlib.metadata import version as _version

project = "gradsmith"
author = "gradsmith contributors"
copyright = "gradsmith contributors, MIT license"
release = _version("gradsmith")
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",  # API pages from the docstrings
    "sphinx.ext.napoleon",  # the docstrings are Google style (Args:, Returns:, Raises:)
    "sphinx.ext.viewcode",  # links from each object to its highlighted source
]

napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
autodoc_member_order = "bysource"
autodoc_typehints = "description"  # types go next to the argument descriptions
autodoc_default_options = {"members": True, "show-inheritance": True}
# No intersphinx: CI has no network beyond the package registry, so torch's inventory cannot
# be fetched; references to torch objects stay plain text (hence no nitpicky mode either).
html_theme = "alabaster"
html_theme_options = {"description": "verify, lint and benchmark custom autograd Functions"}
html_static_path: list[str] = []
exclude_patterns = ["_build"]
