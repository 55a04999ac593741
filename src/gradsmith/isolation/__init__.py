"""Running user code for ``gradsmith check``: in worker processes with a time limit.

- :mod:`.session` plans a check run (list sources, check candidates, collect rows);
- :mod:`.pool` keeps the worker processes and enforces the time limit;
- :mod:`.worker` is the worker's main loop (``python -m gradsmith.isolation.worker``);
- :mod:`.tasks` is the work done for one task, in a worker or in-process.

The CLI and the pytest plugin call into this package; the verifier never imports it.
"""
