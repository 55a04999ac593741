"""Find what ``gradsmith check`` and the pytest plugin verify (private).

Three steps, each its own module, data flowing one way:

- :mod:`~gradsmith.discovery.targets` turns command-line targets (files, directories, dotted
  modules, ``file.py::Name``) into :class:`Source` records without running user code;
- :mod:`~gradsmith.discovery.collect` imports a source and lists its candidates (Function
  subclasses, callables with registered examples) as :class:`Ref` records a worker can reload;
- :mod:`~gradsmith.discovery.synthesize` builds inputs for a candidate that has no registered
  example by probing its forward signature.
"""

from gradsmith.discovery.collect import (
    Candidate,
    Listing,
    Ref,
    TargetImportError,
    list_candidates,
    resolve_ref,
)
from gradsmith.discovery.slots import parameter_names
from gradsmith.discovery.synthesize import NoInputs, Synthesized, Variant, synthesize
from gradsmith.discovery.targets import Source, default_sources, resolve_targets

__all__ = [
    "Candidate",
    "Listing",
    "NoInputs",
    "Ref",
    "Source",
    "Synthesized",
    "TargetImportError",
    "Variant",
    "default_sources",
    "list_candidates",
    "parameter_names",
    "resolve_ref",
    "resolve_targets",
    "synthesize",
]
