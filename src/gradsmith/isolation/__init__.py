"""Running user code for ``gradsmith check`` (and ``gradsmith bench``): isolated, time-limited.

- :mod:`.session` plans a check run (list sources, check candidates, collect rows);
- :mod:`.pool` is ``gradsmith check``'s side: it starts the worker server, sends tasks and
  turns what comes back into outcomes (result, crash, timeout, with streamed progress);
- :mod:`.worker` is the worker server (``python -m gradsmith.isolation.worker``): torch imported
  once, every task in a fresh fork, time limits enforced;
- :mod:`.sandbox` is one task's fork: a keeper that adopts and kills whatever the task starts,
  and the task process itself;
- :mod:`.tasks` is the work done for one task, in a task process or in-process;
- :mod:`.partial` streams a task's progress and turns how it ended into a result (what
  finished before a timeout or a crash, a ``BaseException`` from user code);
- :mod:`.processes` (machine resources, process trees), :mod:`.protocol` (framed messages)
  and :mod:`.tasklog` (a task's output, bounded on disk) are the plumbing.

The CLI and the pytest plugin call into this package; the verifier never imports it, and it
imports none of its users: ``gradsmith bench`` hands it tasks whose kind is the dotted name of
a module (:mod:`gradsmith.bench.task`) that the task process imports
(:func:`.tasks.task_module`). Its plumbing (pool, sandbox, processes, protocol, task logs)
does not import the verifier either; only the check tasks (:mod:`.tasks`, :mod:`.partial`,
the worker's warm-up) do.
"""
