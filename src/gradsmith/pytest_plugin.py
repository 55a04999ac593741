"""pytest plugin: ``pytest --gradsmith PATH`` turns every Function found in PATH into a test.

Installed with gradsmith (entry point ``pytest11: gradsmith``) and inert unless ``--gradsmith``
(or the ``gradsmith_targets`` ini option) is given. PATH takes the same targets as ``gradsmith check`` (file, directory, dotted module,
``file.py::Name``) and may be repeated. Each Function or registered function becomes one item
per registered example (or one item on synthesised inputs); a failing item shows the
verifier's report, and a Function without usable inputs is skipped with the fix. Items run in
the pytest process (no isolation), and ``-k`` selects them like any test. A Function that
raises ``KeyboardInterrupt`` fails its own item (only a real Ctrl-C stops the session).

ini options (``[tool.pytest.ini_options]``, validated: an unknown ``gradsmith_*`` key is a
usage error naming the valid ones): ``gradsmith_targets`` (used when ``--gradsmith`` is not
given), ``gradsmith_approximate``, ``gradsmith_compat`` and ``gradsmith_require`` (names that
must hold, like ``gradsmith check --require``: ``second-order``, or deployment columns with
``gradsmith_compat = true``); ``-o name=value`` overrides them.
"""

from __future__ import annotations

import pytest

from gradsmith._errors import GradsmithUsageError

# ini options ([tool.pytest.ini_options] or pytest.ini); `-o name=value` overrides them
_INI = {
    "gradsmith_targets": ("args", [], "targets checked as test items when --gradsmith is not "
                                     "given (files, directories, dotted modules, "
                                     "file.py::Name; paths relative to the ini file)"),
    "gradsmith_approximate": ("bool", False, "judge gradient quality (relative error, "
                                             "cosine) instead of exactness, like gradsmith "
                                             "check --approximate"),
    "gradsmith_compat": ("bool", False, "also run the deployment checks (compile, export, "
                                        "autocast, ...: seconds per Function), like gradsmith "
                                        "check; default false, like gradsmith.check"),
    "gradsmith_require": ("args", [], "names whose warnings fail an item, like gradsmith check "
                                      "--require: second-order (double backward works), or "
                                      "deployment columns (with gradsmith_compat = true)"),
}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gradsmith", "gradsmith: verify custom autograd Functions")
    group.addoption("--gradsmith", action="append", default=[], metavar="PATH",
                    help="check the autograd Functions in PATH (file, directory, dotted module "
                         "or file.py::Name) as test items; repeatable; replaces the "
                         "gradsmith_targets ini option")
    for name, (kind, default, help_text) in _INI.items():
        parser.addini(name, help_text, type=kind, default=default)


def pytest_configure(config: pytest.Config) -> None:
    targets, options = _settings(config)
    require = _require(config)  # validated even without targets, like the other ini options
    if not targets:
        return
    from gradsmith._requires import TorchMissingError, require_torch

    try:
        require_torch("--gradsmith" if config.getoption("gradsmith") else "gradsmith_targets")
    except TorchMissingError as exc:
        raise pytest.UsageError(str(exc)) from None
    from gradsmith.discovery import resolve_targets

    config._gradsmith_options = options
    config._gradsmith_require = require
    try:
        config._gradsmith_sources = resolve_targets(targets, cwd=config.invocation_params.dir)
    except GradsmithUsageError as exc:
        raise pytest.UsageError(f"--gradsmith: {exc}") from None


def _settings(config: pytest.Config) -> tuple[list[str], dict]:
    """Targets and check options from the command line and the validated ini options.

    ``--gradsmith`` wins over ``gradsmith_targets``; ini paths are relative to the ini file.
    """
    unknown = sorted(k for k in _unknown_ini_keys(config) if k.startswith("gradsmith"))
    if unknown:
        raise pytest.UsageError(
            f"unknown ini option {unknown[0]!r} for the gradsmith plugin; valid options: "
            f"{', '.join(sorted(_INI))}")
    options = {}
    for name, key, meaning in (("gradsmith_approximate", "approximate", True),
                               ("gradsmith_compat", "compat", True)):
        try:
            value = bool(config.getini(name))
        except (ValueError, pytest.UsageError) as exc:  # pytest >= 9 raises UsageError
            raise pytest.UsageError(f"ini option {name} must be true or false ({exc}); e.g. "
                                    f"{name} = {str(not _INI[name][1]).lower()}") from None
        if value == meaning:  # only what differs from gradsmith.check's defaults
            options[key] = value
    targets = config.getoption("gradsmith")
    if targets:
        return targets, options
    targets = [t for t in config.getini("gradsmith_targets") if t]
    if targets and config.inipath is not None:
        from gradsmith._config import resolve_relative

        targets = resolve_relative(targets, config.inipath.parent, config.invocation_params.dir)
    return targets, options


def _require(config: pytest.Config) -> list[str]:
    """The validated ``gradsmith_require`` names (a usage error names a wrong one)."""
    from gradsmith._check_policy import validate_require

    try:
        return validate_require("gradsmith_require",
                                [n for n in config.getini("gradsmith_require") if n])
    except GradsmithUsageError as exc:
        raise pytest.UsageError(str(exc)) from None


def _unknown_ini_keys(config: pytest.Config) -> set[str]:
    try:
        return set(config._get_unknown_ini_keys())  # pytest >= 6; no public equivalent
    except AttributeError:  # a future pytest without it: pytest's own warning remains
        return set()


@pytest.hookimpl(tryfirst=True)  # before -k / -m deselection, so those apply to our items too
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    sources = getattr(config, "_gradsmith_sources", None)
    if not sources:
        return
    from gradsmith.checkrun.task import display_name
    from gradsmith.discovery import TargetImportError, list_candidates
    from gradsmith.discovery.prefilter import needs_import

    seen: set[str] = set()
    ours: list[pytest.Item] = []
    for source in sources:
        if not needs_import(source):  # certainly no candidate: importing it would only cost
            continue
        try:
            listing = list_candidates(source)
        except GradsmithUsageError as exc:
            raise pytest.UsageError(f"--gradsmith: {exc}") from None
        except TargetImportError as exc:
            ours.append(ImportFailedItem.from_parent(session, name=source.label,
                                                     nodeid=source.label, message=str(exc)))
            continue
        for label, message in listing.errors:
            ours.append(ImportFailedItem.from_parent(session, name=label, nodeid=label,
                                                     message=message))
        for candidate in listing.candidates:
            if candidate.key in seen:
                continue
            seen.add(candidate.key)
            for index in range(len(candidate.examples)) if candidate.examples else [None]:
                name = display_name(candidate, index)
                ours.append(GradsmithItem.from_parent(session, name=name, nodeid=name,
                                                      candidate=candidate, example_index=index))
    # Report them as collected, so the "collected N items" line and plugins counting
    # collection reports see them like any other test.
    config.hook.pytest_collectreport(report=pytest.CollectReport(
        nodeid="gradsmith", outcome="passed", longrepr=None, result=ours))
    items.extend(ours)


class GradsmithCheckFailed(Exception):
    """Raised by a failing item; carries the result row."""

    def __init__(self, result: dict) -> None:
        super().__init__(result["name"])
        self.result = result


class GradsmithItem(pytest.Item):
    """One Function (and one of its examples) checked by :func:`gradsmith.check`."""

    def __init__(self, *, candidate, example_index, **kwargs) -> None:
        super().__init__(**kwargs)
        self.candidate = candidate
        self.example_index = example_index

    def runtest(self) -> None:
        from gradsmith.checkrun.task import check_candidate
        from gradsmith.isolation.processes import sigint_watch

        options = getattr(self.config, "_gradsmith_options", {})
        with sigint_watch() as sigint:
            try:
                result = check_candidate(self.candidate, self.example_index, options)
            except KeyboardInterrupt as exc:
                if sigint:  # Ctrl-C: pytest stops the session, as for any test
                    raise
                # Raised by the Function: its item's failure, not the end of the session
                # (pytest, and pytest-xdist's workers, stop everything on KeyboardInterrupt).
                from gradsmith.checkrun.task import KIND
                from gradsmith.isolation.task import raised_result

                task = (KIND, self.candidate, self.example_index, options)
                raise GradsmithCheckFailed(raised_result(task, exc, {})) from None
        require = getattr(self.config, "_gradsmith_require", [])
        if require:  # the same policy as gradsmith check --require
            from gradsmith._check_policy import apply

            apply([result], select=[], ignore=[], require=require)
        if result["verdict"] == "skip":  # reported at the user's class (reportinfo), not here
            raise pytest.skip.Exception(result["reason"], _use_item_location=True)
        if result["verdict"] == "fail":
            raise GradsmithCheckFailed(result)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, GradsmithCheckFailed):
            r = excinfo.value.result
            # the "skipped <check>: <reason>" lines only with -v, as on the command line
            text = r["text"] if self.config.get_verbosity() > 0 else r.get("_text_brief",
                                                                         r["text"])
            return "\n".join(x for x in (f"gradsmith check {r['name']} failed",
                                         r["inputs"] and f"inputs: {r['inputs']}",
                                         r["reason"], text) if x)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        if self.candidate.file is not None:  # where the Function is defined (0-based line)
            return self.candidate.file, (self.candidate.line or 1) - 1, f"gradsmith: {self.name}"
        return self.path, None, f"gradsmith: {self.name}"


class ImportFailedItem(pytest.Item):
    """A target that could not be imported: one failing item, so the run cannot look green."""

    def __init__(self, *, message: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.message = message

    def runtest(self) -> None:
        raise GradsmithCheckFailed({"name": self.name, "inputs": None, "text": None,
                                    "reason": f"import failed: {self.message}"})

    repr_failure = GradsmithItem.repr_failure

    def reportinfo(self):
        return self.path, None, f"gradsmith: {self.name}"
