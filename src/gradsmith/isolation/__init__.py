"""Running user code, isolated and time-limited: the runner under ``gradsmith check``,
``gradsmith bench`` and the pytest plugin.

- :mod:`.pool` is the caller's side: it starts the worker server, sends tasks and
  turns what comes back into outcomes (result, crash, timeout, with streamed progress);
- :mod:`.worker` is the worker server (``python -m gradsmith.isolation.worker``): torch imported
  once, every task in a fresh fork, time limits enforced;
- :mod:`.sandbox` is one task's fork: a keeper that adopts and kills whatever the task starts,
  and the task process itself;
- :mod:`.task` runs one task in the current process (a task process, or in-process): the
  module its kind names does the work, and whatever user code raises becomes its result;
- :mod:`.template` is an optional warm template of the worker server: a program running many
  short sessions in one process (a test suite) installs one, and each pool forks its server
  from it instead of starting a fresh interpreter;
- :mod:`.processes` (machine resources, process trees), :mod:`.protocol` (framed messages)
  and :mod:`.tasklog` (a task's output, bounded on disk) are the plumbing.

Its users call into this package; the verifier never imports it, and it imports none of
them, nor the verifier, discovery or any other part of gradsmith but :mod:`gradsmith._errors`
and :mod:`gradsmith._triton` (the environment user code runs in). Each user hands it tasks
whose kind is the dotted name of the module doing the work (:func:`.task.task_module`):
:mod:`gradsmith.discovery.task` lists a target's candidates, :mod:`gradsmith.checkrun.task`
checks one, :mod:`gradsmith.bench.task` measures one; a module's optional ``warm_up`` is
called in the worker server before the tasks of its kind fork.
"""
