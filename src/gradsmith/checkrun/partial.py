"""What a check task found before it ended, as plain data (private).

A check task (:mod:`gradsmith.checkrun.task`) streams a :func:`snapshot` at every check
boundary, so a task that crashes or runs out of time still has the findings of the checks that
finished (:func:`partial_report`, :func:`add_partial`).
"""

from __future__ import annotations


def snapshot(running: str | None, reports: list) -> dict:
    """What a task's checks have found so far, as plain data.

    Args:
        running: the check in progress (``None`` when the last one finished).
        reports: the :class:`~gradsmith.checker.report.Report` of every ``check`` call the
            task made so far (one per input set), the last one still being filled.

    Returns:
        ``running`` (with the input set when it is not the first), ``checks`` finished,
        ``skipped``, ``findings`` (dicts), ``text`` and ``text_brief`` (the findings as a
        report prints them, with and without the skipped checks), ``eager_done``: every
        eager check of the first input set has finished, so the core verdict is known, and
        ``following``: what runs after them (deployment checks, more input sets), and
        ``in_deployment``: the check running is a deployment check (compile, export, ...).
    """
    from gradsmith.checker.deploy import DEPLOY_MODULES
    from gradsmith.checker.report import Report

    partial = Report(reports[-1].name)
    for report in reports:
        known = {(f.code, f.input) for f in partial.findings}
        partial.findings += [f for f in report.findings if (f.code, f.input) not in known]
        partial.checks += [c for c in report.checks if c not in partial.checks]
        partial.skipped.update(report.skipped)
    partial.sort()
    eager_done = len(reports) > 1 or running is None or running in DEPLOY_MODULES
    following = ("the deployment checks" if running in DEPLOY_MODULES else
                 "more input sets" if len(reports) > 1 else "")
    if running and len(reports) > 1:
        running = f"{running} (input set {len(reports)})"
    return {"running": running, "eager_done": eager_done, "following": following,
            "in_deployment": running in DEPLOY_MODULES,
            "checks": list(partial.checks), "skipped": dict(partial.skipped),
            "findings": [f.to_dict() for f in partial.findings],
            "text": "\n".join(partial.format().splitlines()[1:]),
            "text_brief": "\n".join(partial.format(skipped=False).splitlines()[1:])}


def partial_report(name: str, progress: dict | None, unfinished: str | None) -> dict | None:
    """A report dict (the shape of ``Report.to_dict()``) from the last progress snapshot of a
    check that did not finish, with ``unfinished`` naming the check it was in."""
    if not progress:
        return None
    return {"name": name, "passed": False, "elapsed": 0.0, "checks": progress["checks"],
            "skipped": progress["skipped"], "saved_bytes": None,
            "findings": progress["findings"], "jacobians": {}, "unfinished": unfinished}


def add_partial(result: dict, label: str, snap: dict) -> None:
    """Put into ``result`` (a row) what the checks that finished had found: ``snap``'s checks,
    findings (as a report unfinished in its ``running`` check) and text."""
    result.update(checks=list(snap["checks"]),
                  report=partial_report(label, snap, snap.get("running")),
                  text=snap["text"] or None, _text_brief=snap["text_brief"] or None)
