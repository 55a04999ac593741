"""``gradsmith check`` on user code: its session and its tasks, above the runner of user code.

- :mod:`.session` plans a check run (list sources, check candidates, collect rows) and hands
  the tasks to the isolated worker (:mod:`gradsmith.isolation`) or runs them in-process;
- :mod:`.task` is one check task (check one candidate on one example): the worker knows it only
  by its module's dotted name, and calls its hooks (``warm_up``, ``listening``, ``run``,
  ``raised``; see :func:`gradsmith.isolation.task.task_module`);
- :mod:`.partial` is what a check task found before it ended (progress snapshots).

Listing a target's candidates is a task of its own, :mod:`gradsmith.discovery.task`.
"""
