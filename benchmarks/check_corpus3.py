"""Issue 18's third real-code corpus: zero-configuration ``gradsmith check`` on code nobody here saw.

The corpus (``results/check_corpus3_split.json``) lists 31 public projects, their commits and
120 CPU-runnable ``autograd.Function``s, split by project (sha256 of ``owner+name``,
alternating) into a development half and a held-out half before anything was judged or run.
Every Function's judgement (``results/check_corpus3_judgements.json``; the held-out half
first, then the development half) was made by reading it and confirming it with an
independent computation before gradsmith ran on it. The projects' code never enters this repository: extract each tree outside it and put
what their imports need (plus import shims for compiled modules that cannot be built here) on
``--deps``.

Per file this script runs ``gradsmith check FILE::Fn ... --format json --repro DIR`` as the
project's user would, from its checkout (the project root on ``PYTHONPATH``), with no examples
and no options (``check_newcorpus.run_file``); applies every declaration line printed for an
estimator exactly as printed (``check_newcorpus.apply_declarations``) and scores
each requested Function against its judgement:

- false PASS: a ``defect`` or ``estimator-defect`` that PASSes;
- false alarm: a ``correct`` Function that FAILs (an INCOMPLETE row is counted apart);
- missing row: a requested Function with no row of its own;
- skip: a row that checked nothing (SKIP, a crash, a timeout, an import or inputs error),
  except for Functions judged ``not-checkable`` or ``opaque`` (counted apart);
- defect caught: a ``defect``/``estimator-defect`` row that FAILs with an error finding;
- declaration passes as printed: an ``estimator`` whose printed declaration, applied verbatim,
  makes the check pass (estimators that equal the true gradient on their domain, such as a
  gradient clamped only for x > 15, are reported apart: a plain PASS is right for them).

Environment (``/tmp/cc3deps``): the previous corpus's dependency folder (scipy, scikit-learn,
einops, jaxtyping, ...; without its copies of torch's ``torchgen`` and ``functorch``, which
shadow torch's own), ``pip install --target --no-deps`` of what the projects import (e.g.
linear_operator, opt_einsum, pyro-api, timm, pandas, matplotlib, omegaconf, pydantic), a
``sitecustomize.py`` whose import shims stand in for modules that cannot be built or installed
here (k2, torchvision, CUDA extensions, wandb, ...; ``SHIMS`` lists them) and a two-helper
``icefall.utils``. No judged Function calls a shim except the two judged ``not-checkable``.

Usage (the lead runs the held-out half once, at the end)::

    python benchmarks/check_corpus3.py --half heldout --corpus /tmp/checkcorpus3 \\
        --deps /tmp/cc3deps

Results: ``benchmarks/results/check_corpus3_<half>.{json,md}`` (``_partial`` with --project);
the raw reports, which quote the projects' code, go to ``CORPUS/_reports/`` instead.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from check_newcorpus import apply_declarations, run_file  # noqa: E402  (sibling benchmark)
from real_corpus import _codes, _env, _guided  # noqa: E402

DEFECTS = ("defect", "estimator-defect")
APART = ("not-checkable", "opaque")  # nothing gradsmith could be expected to check
UNCHECKED_ERRORS = ("crash", "timeout", "import", "exception")


def _target_name(row: dict) -> str:
    """The qualified name a row answers for: ``file.py::A.B[float32]`` -> ``A.B``."""
    target = row.get("target") or row.get("name") or ""
    return target.rsplit("::", 1)[-1].split("[", 1)[0]


def _match(rows: list[dict], names: list[str]) -> dict[str, list[dict]]:
    """Rows per requested name: the row's target names it exactly, or (a row named by the
    attribute it is bound to) ends with it."""
    out: dict[str, list[dict]] = {n: [] for n in names}
    for row in rows:
        got = _target_name(row)
        for n in names:
            if got == n or got.endswith("." + n) or n.endswith("." + got):
                out[n].append(row)
                break
    return out


def _outcome(rows: list[dict]) -> tuple[str, dict | None]:
    """One outcome per requested Function from its rows (one per dtype, say):
    fail > incomplete > pass > unchecked; the row that decided it."""
    if not rows:
        return "missing", None
    kinds = []
    for r in rows:
        if r.get("verdict") == "pass":
            kinds.append(("pass", r))
        elif r.get("verdict") == "fail" and r.get("error") in (None, ""):
            kinds.append(("fail", r))
        elif r.get("verdict") == "fail" and r.get("error") == "incomplete":
            kinds.append(("incomplete", r))
        else:
            kinds.append(("unchecked", r))
    for kind in ("fail", "incomplete", "pass", "unchecked"):
        for k, r in kinds:
            if k == kind:
                return k, r
    return "unchecked", rows[0]


OMITTED = "[code derived from the project's source omitted: third-party code stays out of the repository]"


def _scrub(row: dict) -> dict:
    """A copy of a row fit for the repository: suggested rewrites of the project's own
    forward/backward (multi-line hints, ``details.rewrite``) replaced by a marker."""
    row = json.loads(json.dumps(row, default=str))
    for f in (row.get("report") or {}).get("findings", []):
        hint = f.get("hint") or ""
        if "\n" in hint:
            f["hint"] = hint.split("\n", 1)[0] + "\n" + OMITTED
        details = f.get("details") or {}
        if details.get("rewrite"):
            details["rewrite"] = OMITTED
    return row


def _eager_seconds(row: dict | None) -> float | None:
    """Seconds of a row's eager checks alone (``report.timings`` without the deployment
    checks: compile, export, autocast, ...); None for reports without timings (before
    issue 18's per-check timings)."""
    from gradsmith.checker.deploy import DEPLOY_MODULES

    timings = ((row or {}).get("report") or {}).get("timings")
    if not timings:
        return None
    return round(sum(v for k, v in timings.items() if k not in DEPLOY_MODULES), 4)


def judged_split(half: str, name: str = "check_corpus3") -> dict:
    """The split with each Function's judgement merged in (``unjudged`` where the
    judgements file has none). ``name`` picks another corpus's files
    (``results/NAME_split.json``, ``results/NAME_judgements.json``)."""
    split_path = HERE / "results" / f"{name}_split.json"
    judgements_path = HERE / "results" / f"{name}_judgements.json"
    split = json.loads(split_path.read_text())
    judged = {}
    if judgements_path.exists():
        for j in json.loads(judgements_path.read_text())["functions"]:
            judged[(j["project"], j["path"], j["function"])] = j
    for project in split[half]:
        for fn in split["projects"][project]["functions"]:
            j = judged.get((project, fn["path"], fn["function"]), {})
            fn["judgement"] = j.get("judgement", "unjudged")
            fn["exact_in_domain"] = bool(j.get("exact_in_domain"))
            fn["family"] = j.get("family")
    return split


def score(split: dict, half: str, found: dict, applied: dict) -> dict:
    table, c = [], defaultdict(int)
    for project in split[half]:
        for fn in split["projects"][project]["functions"]:
            key = (project, fn["path"], fn["function"])
            outcome, row = found.get(key, ("missing", None))
            j = fn["judgement"]
            passes = (applied.get("::".join(key)) or {}).get("passed")
            apart = j in APART
            c["functions"] += 1
            c["judged"] += j != "unjudged"
            c[f"judged_{j}"] += 1
            c["apart"] += apart
            c["missing"] += outcome == "missing"
            c["skips"] += outcome == "unchecked" and not apart
            c["incomplete"] += outcome == "incomplete"
            c["false_pass"] += j in DEFECTS and outcome == "pass"
            c["false_alarm"] += j == "correct" and outcome == "fail"
            c["correct_incomplete"] += j == "correct" and outcome == "incomplete"
            c["correct_pass"] += j == "correct" and outcome == "pass"
            c["defects"] += j in DEFECTS
            c["defects_caught"] += j in DEFECTS and outcome == "fail"
            declarable = j == "estimator" and not fn["exact_in_domain"]
            c["estimators"] += j == "estimator"
            c["estimators_declarable"] += declarable
            c["estimators_guided"] += declarable and _guided(row)
            c["declarations_pass"] += declarable and bool(passes)
            c["estimators_exact_in_domain"] += j == "estimator" and fn["exact_in_domain"]
            c["exact_in_domain_pass"] += (j == "estimator" and fn["exact_in_domain"]
                                          and outcome == "pass")
            elapsed = (row or {}).get("elapsed") or 0.0
            eager = _eager_seconds(row)
            c["elapsed_checked"] += elapsed if outcome in ("pass", "fail", "incomplete") else 0.0
            if eager is not None and outcome in ("pass", "fail", "incomplete"):
                c["eager_timed"] += 1
                c["eager_checked"] += eager
            c["checked"] += outcome in ("pass", "fail", "incomplete")
            table.append({
                "project": project, "path": fn["path"], "function": fn["function"],
                "line": fn["line"], "judgement": j, "family": fn.get("family"),
                "outcome": outcome, "verdict": (row or {}).get("verdict"),
                "error": (row or {}).get("error"), "error_codes": _codes(row),
                "warnings": _codes(row, "warning"), "inputs": (row or {}).get("inputs"),
                "elapsed": elapsed, "eager_elapsed": eager, "declaration_passes": passes,
                "guided": _guided(row)})
    c["seconds_per_checked_function"] = round(c["elapsed_checked"] / max(c["checked"], 1), 3)
    c["eager_seconds_per_checked_function"] = round(c["eager_checked"] / max(c["eager_timed"], 1),
                                                    3)
    return {"half": half, "counts": dict(c), "table": table}


def goals(c: dict) -> list[str]:
    c = defaultdict(int, c)
    n = c["functions"] - c["apart"]
    items = [
        ("0 false PASS", c["false_pass"] == 0, f"{c['false_pass']} of {c['defects']} defects"),
        ("0 false alarms on correct Functions", c["false_alarm"] == 0,
         f"{c['false_alarm']} of {c['judged_correct']}; {c['correct_incomplete']} incomplete"),
        ("every requested target a row", c["missing"] == 0, f"{c['missing']} missing"),
        ("at most 1 skip in 12", c["skips"] * 12 <= n, f"{c['skips']} in {n}"),
        (">= 80% of real defects caught", c["defects_caught"] * 10 >= 8 * c["defects"],
         f"{c['defects_caught']} of {c['defects']}"),
        (">= 90% of estimators given a declaration that passes as printed",
         c["declarations_pass"] * 10 >= 9 * c["estimators_declarable"],
         f"{c['declarations_pass']} of {c['estimators_declarable']}; exact-in-domain "
         f"estimators that PASS: {c['exact_in_domain_pass']} of "
         f"{c['estimators_exact_in_domain']}"),
        ("eager verdict under 0.5 s per Function", c["seconds_per_checked_function"] < 0.5,
         f"{c['seconds_per_checked_function']} s over {c['checked']} checked, deployment "
         f"checks included; the eager checks alone: "
         f"{c['eager_seconds_per_checked_function'] if c['eager_timed'] else 'not timed'} s"
         f" over {c['eager_timed']}"),
    ]
    return [f"- {'MET' if ok else 'NOT MET'}: {what} ({count})" for what, ok, count in items]


def markdown(data: dict) -> str:
    c = defaultdict(int, data["counts"])
    lines = [f"# Third new corpus, {data['half']} half (issue 18)", "",
             f"{c['functions']} Functions ({c['apart']} judged not checkable here or with "
             f"nothing to check, counted apart); wall {data['wall_total']} s.", "",
             *goals(c), "",
             "| project | Function | judgement | outcome | error codes | warnings | "
             "declaration passes | s |", "|---|---|---|---|---|---|---|---:|"]
    for r in data["table"]:
        passes = "-" if r["declaration_passes"] is None else r["declaration_passes"]
        lines.append(f"| {r['project']} | {r['function']} | {r['judgement']} | {r['outcome']} "
                     f"| {', '.join(r['error_codes']) or '-'} | "
                     f"{', '.join(r['warnings']) or '-'} | {passes} | {r['elapsed']:.1f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", choices=("dev", "heldout"), required=True)
    parser.add_argument("--corpus", default="/tmp/checkcorpus3", type=Path)
    parser.add_argument("--deps", default=None, help="PYTHONPATH entry with the projects' deps")
    parser.add_argument("--file-timeout", default=600.0, type=float)
    parser.add_argument("--project", action="append", help="only these projects (development)")
    parser.add_argument("--out", default=HERE / "results", type=Path)
    parser.add_argument("--name", default="check_corpus3",
                        help="corpus files results/NAME_split.json and NAME_judgements.json; "
                             "results go to NAME_<half>.{json,md} (e.g. check_corpus4a)")
    args = parser.parse_args()
    split = judged_split(args.half, args.name)
    if args.project:
        unknown = sorted(set(args.project) - set(split[args.half]))
        if unknown:
            parser.error(f"--project {unknown[0]!r} is not in the {args.half} half; "
                         f"choose from {', '.join(split[args.half])}")
        split[args.half] = [p for p in split[args.half] if p in args.project]
    repro = args.corpus / "_repro" / args.half
    found, rows_by_key, walls, errors = {}, {}, {}, {}
    for project in split[args.half]:
        # As a user runs it from the project's checkout: its root importable (``ldm.util``
        # from ``ldm/modules/...``, ``braincog`` from ``examples/...``).
        env = _env(os.pathsep.join(p for p in (args.deps, str(args.corpus / project)) if p),
                   args.corpus)
        by_file = defaultdict(list)
        for fn in split["projects"][project]["functions"]:
            by_file[fn["path"]].append(fn["function"])
        for path, names in by_file.items():
            targets = [f"{args.corpus / project / path}::{n}" for n in dict.fromkeys(names)]
            doc, wall, err = run_file(targets, env, repro / project, args.file_timeout)
            label = f"{project}/{path}"
            walls[label] = round(wall, 2)
            if err:
                errors[label] = err
            for name, rows in _match(doc.get("results", []), list(dict.fromkeys(names))).items():
                outcome, row = _outcome(rows)
                found[(project, path, name)] = (outcome, row)
                if row is not None:
                    rows_by_key[(project, path, name)] = row
            print(f"{label}: {len(doc.get('results', []))} rows in {wall:.1f} s", flush=True)
    applied = {}
    for project in split[args.half]:
        env = _env(os.pathsep.join(p for p in (args.deps, str(args.corpus / project)) if p),
                   args.corpus)
        applied.update(apply_declarations(
            {k: v for k, v in rows_by_key.items() if k[0] == project}, env))
    data = score(split, args.half, found, applied)
    # An error's last line (the exception) only: tracebacks quote the projects' code.
    data.update(wall_per_file=walls, wall_total=round(sum(walls.values()), 1),
                errors={k: (v.strip().splitlines() or [""])[-1][:300] for k, v in errors.items()},
                declarations_applied=applied)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = f"{args.name}_{args.half}{'_partial' if args.project else ''}"
    # Raw reports quote the projects' code (messages, hints): they stay beside the corpus,
    # outside the repository.
    raw = args.corpus / "_reports" / f"{stem}.json"
    raw.parent.mkdir(parents=True, exist_ok=True)
    raw.write_text(json.dumps({"errors": errors, "reports": {
        "::".join(k): _scrub(v) for k, v in rows_by_key.items()}}, indent=1, default=str))
    (args.out / f"{stem}.json").write_text(json.dumps(data, indent=1, default=str))
    (args.out / f"{stem}.md").write_text(markdown(data))
    print(markdown(data))


if __name__ == "__main__":
    main()
