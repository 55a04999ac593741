"""The op catalog's implementations (private): the public names are in
:mod:`gradsmith.functional` and :mod:`gradsmith.nn`, which import from here."""

from gradsmith._requires import require_torch

require_torch("the op catalog (gradsmith.functional, gradsmith.nn)")
