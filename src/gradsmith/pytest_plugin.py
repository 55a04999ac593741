"""pytest plugin entry point (``pytest --gradsmith PATH``); the CLI helper fills it in."""
