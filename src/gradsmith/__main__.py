"""``python -m gradsmith``: same as the ``gradsmith`` command."""

from gradsmith.cli import main

raise SystemExit(main())
