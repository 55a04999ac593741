"""Seconds per Function of gradsmith's eager verdict (``compat=False``) against gradcheck +
gradgradcheck on the same inputs (issue 18: "bring gradsmith's eager verdict under 0.5 s per
Function without losing sensitivity").

One process, one warm-up pass (imports, first calls), then ``--repeat`` passes; within a pass
each Function is timed in every mode one after the other (interleaved, so load changes hit
all of them):

* ``zero-config``: what ``gradsmith check FILE --no-compat`` does per Function in its worker,
  input synthesis and the variant input sets included
  (``check_candidate`` of the task runner, with no example);
* ``given inputs``: the same on the Function's first registered example;
* ``gradcheck + gradgradcheck``: ``torch.autograd.gradcheck`` and ``gradgradcheck`` (exact
  mode, their defaults) on those registered inputs, floating tensors requiring grad.
* with ``--baseline`` also ``zero-config, scalar fit`` (only the latest of issue 18's
  speed-ups switched off: the smooth surrogate fit one slope at a time), and ``zero-config,
  before`` and ``given inputs, before``: the same with all of issue 18's speed-ups switched
  off (no random-direction screen, Python's and NumPy's random states saved and restored
  around every call, the smooth surrogate fit searching one slope at a time as it did,
  :func:`_scalar_fit`), in the same pass.

With ``--corpus DIR`` the Functions are the development half of issue 18's third corpus
(``results/check_corpus3_split.json``; run with ``PYTHONPATH=DEPS`` as for
``check_corpus3.py``, so its import shims load) instead of the catalog, zero-config only
(they have no registered inputs).

The Functions are the embedded examples (``gradsmith.examples``: activations, linear layers,
reductions, estimators, gradient control), all correct. Medians per Function and of the
per-Function medians are recorded with the load average (1 min) before and after.

Usage::

    python benchmarks/check_eager_cost.py --repeat 2 --baseline      # writes results/
    python benchmarks/check_eager_cost.py --profile zero-config       # cProfile, top 40
    python benchmarks/check_eager_cost.py --mutants                   # kill rate, screen on/off
    PYTHONPATH=/tmp/cc3deps python benchmarks/check_eager_cost.py --baseline \
        --corpus /tmp/checkcorpus3 --label "corpus 3 dev"              # dev half, zero-config
    PYTHONPATH=/tmp/cc4deps:/tmp/cc3deps python benchmarks/check_eager_cost.py --explained \
        --corpus /tmp/checkcorpus4 --split check_corpus4b --label "corpus 4b dev"

``--mutants`` plants gradient bugs in every Function's backward (each returned gradient 1 %
too large; one element of one gradient doubled, or set to 1 where it was 0; one element
1e-4 off, just above ``atol``; one gradient's sign flipped; every gradient detached, so double
backward is silently zero) and counts how many the eager verdict on the registered inputs
kills (second order required, as gradgradcheck requires it: :func:`killed`) with the random-direction screen (:mod:`gradsmith.checker.screen`) and without it
(element-by-element differences only, the comparison before issue 18).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import time
import warnings
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
MODES = ("zero-config", "given inputs", "gradcheck + gradgradcheck")
# The same two eager verdicts without issue 18's speed-ups (no random-direction screen, host
# random states saved and restored around every call), timed interleaved in the same pass.
BASELINE = ("zero-config, before", "given inputs, before")
# Only the last of them switched off (the smooth surrogate fit searching one slope at a time):
# the code as it was before that change alone.
SCALAR_FIT = ("zero-config, scalar fit",)
# The repeated explanations switched back on (a further input set fitting the declaration of
# an estimator, or re-judging the double-backward mismatch, an earlier set already reported;
# second order re-judging every disagreeing element, not the first 8 confirmed): the code as
# it was before those changes (``--explained``).
EXPLAINED = ("zero-config, explained again",)


def _candidates(limit: int | None, corpus: Path | None = None, split: str = "check_corpus3"):
    from gradsmith.discovery import Source, list_candidates

    if corpus is not None:
        return _corpus_candidates(corpus, split)[:limit or None]
    listing = list_candidates(Source("module", "gradsmith.examples", "gradsmith.examples"))
    found = [c for c in listing.candidates if c.examples]
    return found[:limit] if limit else found


def _corpus_candidates(corpus: Path, name: str = "check_corpus3") -> list:
    """The development half's Functions that import here, each project's root importable
    (``name``: the corpus, ``results/NAME_split.json``)."""
    import sys

    from gradsmith.discovery import Source, list_candidates

    split = json.loads((RESULTS / f"{name}_split.json").read_text())
    found = []
    for project in split["dev"]:
        root = str(corpus / project)
        if root not in sys.path:
            sys.path.insert(0, root)
        for fn in split["projects"][project]["functions"]:
            try:
                listing = list_candidates(Source("file", f"{root}/{fn['path']}", fn["path"],
                                                 names=(fn["function"],)))
            except Exception as exc:  # noqa: BLE001 - not importable here: left out, said so
                print(f"left out {project} {fn['function']}: {type(exc).__name__}: {exc}")
                continue
            found += listing.candidates
    return found


def _gradcheck(candidate) -> None:
    import torch

    from gradsmith._example import examples_of
    from gradsmith.discovery import resolve_ref

    obj = resolve_ref(candidate.ref)
    fn = obj.apply if isinstance(obj, type) else obj
    args = tuple(a.detach().clone().requires_grad_(True)
                 if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                 for a in examples_of(obj)[0].make_args())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.autograd.gradcheck(fn, args, raise_exception=False)
            torch.autograd.gradgradcheck(fn, args, raise_exception=False)
        except Exception:  # noqa: BLE001 - a Function gradcheck cannot handle costs what it cost
            pass


def run_mode(mode: str, candidate) -> dict:
    """Time one mode on one candidate; returns seconds and the verdict."""
    try:  # the task runner, moved out of gradsmith.isolation
        from gradsmith.checkrun.task import check_candidate
    except ImportError:
        from gradsmith.isolation.tasks import check_candidate

    if mode in BASELINE:
        with _before_issue_18():
            return run_mode(MODES[BASELINE.index(mode)], candidate)
    if mode in SCALAR_FIT:
        with _scalar_fit_only():
            return run_mode("zero-config", candidate)
    if mode in EXPLAINED:
        with _explained_again():
            return run_mode("zero-config", candidate)
    start = time.perf_counter()
    verdict = None
    if mode == "zero-config":
        verdict = check_candidate(candidate, None, {"compat": False})["verdict"]
    elif mode == "given inputs":
        verdict = check_candidate(candidate, 0, {"compat": False})["verdict"]
    else:
        _gradcheck(candidate)
    return {"seconds": time.perf_counter() - start, "verdict": verdict}


@contextmanager
def _before_issue_18():
    from gradsmith.checker import engine, gradients, rng, surrogate_fit

    saved = gradients.screened, engine.host_restored_once, surrogate_fit.fit_smooth
    gradients.screened = lambda *args: None
    engine.host_restored_once = rng.preserved_global_rng
    surrogate_fit.fit_smooth = _scalar_fit
    try:
        yield
    finally:
        gradients.screened, engine.host_restored_once, surrogate_fit.fit_smooth = saved


@contextmanager
def _explained_again():
    from gradsmith.checker import gradients, reported

    saved = reported.known, gradients.SECOND_ORDER_ENOUGH
    reported.known = lambda code, label: False
    gradients.SECOND_ORDER_ENOUGH = None
    try:
        yield
    finally:
        reported.known, gradients.SECOND_ORDER_ENOUGH = saved


@contextmanager
def _scalar_fit_only():
    from gradsmith.checker import surrogate_fit

    saved = surrogate_fit.fit_smooth
    surrogate_fit.fit_smooth = _scalar_fit
    try:
        yield
    finally:
        surrogate_fit.fit_smooth = saved


def _scalar_fit(u, d, deriv):
    """The smooth surrogate fit as it was before issue 18 (commit 7c6598e): one residual per
    slope, 601 grid slopes then 80 golden-section steps of two."""
    import math

    from gradsmith.checker.slope_fit import _GRID, FIT, _residual

    scale = float(d.abs().max())

    def residual(p: float) -> tuple[float, float]:
        return _residual(p, u, d, scale, deriv)

    errors = [residual(float(p))[0] for p in _GRID]
    best = min(range(len(errors)), key=errors.__getitem__)
    lo = math.log(float(_GRID[max(best - 1, 0)]))
    hi = math.log(float(_GRID[min(best + 1, len(_GRID) - 1)]))
    golden = (math.sqrt(5) - 1) / 2
    for _ in range(80):
        a, b = hi - golden * (hi - lo), lo + golden * (hi - lo)
        if residual(math.exp(a))[0] < residual(math.exp(b))[0]:
            hi = b
        else:
            lo = a
    p = math.exp((lo + hi) / 2)
    err, c = residual(p)
    if err > FIT or c == 0:
        return None
    return c / p, p


def measure(repeat: int, limit: int | None, modes: tuple[str, ...],
            corpus: Path | None = None, split: str = "check_corpus3") -> dict:
    candidates = _candidates(limit, corpus, split)
    times: dict[str, dict[str, list[float]]] = {m: {} for m in modes}
    verdicts: dict[str, dict[str, str | None]] = {m: {} for m in modes}
    # one name per candidate (two projects' files may both hold a SwishImplementation)
    names = []
    for c in candidates:
        names.append(c.ref.attr if c.ref.attr not in names else
                     f"{c.ref.attr} ({sum(n.startswith(c.ref.attr) for n in names) + 1})")
    load_before = os.getloadavg()[0]
    for rep in range(repeat + 1):  # pass 0 is the warm-up
        for name, c in zip(names, candidates):
            for mode in modes:
                result = run_mode(mode, c)
                if rep:
                    times[mode].setdefault(name, []).append(result["seconds"])
                    verdicts[mode][name] = result["verdict"]
    load_after = os.getloadavg()[0]
    per = {m: {name: round(statistics.median(v), 3) for name, v in times[m].items()}
           for m in modes}
    return {"functions": names, "repeat": repeat,
            "load_before": round(load_before, 1), "load_after": round(load_after, 1),
            "median_per_function": {m: round(statistics.median(per[m].values()), 3)
                                    for m in modes},
            "mean_per_function": {m: round(statistics.fmean(per[m].values()), 3)
                                  for m in modes},
            "per_function": per, "verdicts": verdicts}


def _mutant(cls: type, kind: str, which: int) -> type:
    import torch

    def backward(ctx, *grads):
        got = cls.backward(ctx, *grads)
        many = isinstance(got, tuple)
        got = list(got) if many else [got]
        slots = [i for i, g in enumerate(got) if isinstance(g, torch.Tensor) and g.numel()]
        if slots:
            i = slots[which % len(slots)]
            if kind == "scale 1.01":
                got = [g * 1.01 if isinstance(g, torch.Tensor) else g for g in got]
            elif kind == "detached":
                got = [g.detach() if isinstance(g, torch.Tensor) else g for g in got]
            elif kind == "sign":
                got[i] = -got[i]
            else:
                flat = got[i].reshape(-1).clone()
                j = (7 * which) % flat.numel()
                if kind == "one element x2":
                    flat[j] = flat[j] * 2 if flat[j] != 0 else 1.0
                else:  # "one element +1e-4"
                    flat[j] = flat[j] + 1e-4
                got[i] = flat.reshape(got[i].shape)
        return tuple(got) if many else got[0]

    return type(f"{cls.__name__}_{kind}", (cls,), {"backward": staticmethod(backward)})


MUTATIONS = ("scale 1.01", "one element x2", "one element +1e-4", "sign", "detached")


def mutants() -> dict:
    """Kill counts with the screen and without it, on the registered inputs."""
    from gradsmith._example import examples_of
    from gradsmith.checker import gradients
    from gradsmith.discovery import resolve_ref

    real = gradients.screened
    counts = {"screen": {}, "no screen": {}}
    differ = []
    for c in _candidates(None):
        obj = resolve_ref(c.ref)
        if not isinstance(obj, type):
            continue
        ex = examples_of(obj)[0]
        for kind in MUTATIONS:
            for which in (0, 1):
                fn = _mutant(obj, kind, which)
                verdicts = {}
                for label in counts:
                    gradients.screened = real if label == "screen" else (lambda *a: None)
                    try:
                        report = gradsmith_check(fn, ex)
                        verdicts[label] = killed(report)
                    finally:
                        gradients.screened = real
                    tally = counts[label].setdefault(kind, [0, 0])
                    tally[0] += verdicts[label]
                    tally[1] += 1
                if verdicts["screen"] != verdicts["no screen"]:
                    differ.append(f"{c.ref.attr} {kind} #{which}: {verdicts}")
    return {"counts": counts, "differ": differ}


def killed(report) -> bool:
    """A mutant is killed when the verdict fails as the project would run it against gradcheck +
    gradgradcheck, i.e. with second order required (``--require second-order``): a backward
    autograd cannot differentiate is then an error, not the default's warning."""
    return not report.passed or any(f.code == "double-backward-unsupported"
                                    for f in report.findings)


def gradsmith_check(fn, ex):
    import gradsmith

    return gradsmith.check(fn, *ex.make_args(), surrogate=ex.surrogate,
                           **{**ex.options, "compat": False})


def profile(mode: str, limit: int | None, top: int) -> None:
    candidates = _candidates(limit)
    for c in candidates:  # warm-up
        run_mode(mode, c)
    prof = cProfile.Profile()
    prof.enable()
    for c in candidates:
        run_mode(mode, c)
    prof.disable()
    pstats.Stats(prof).sort_stats("cumulative").print_stats(top)
    pstats.Stats(prof).sort_stats("tottime").print_stats(top)


def _markdown(runs: dict) -> str:
    from gradsmith.bench import environment

    env = environment()
    every = [m for m in MODES + BASELINE + SCALAR_FIT + EXPLAINED if any(m in r["median_per_function"]
                                                for r in runs.values())]

    def cell(r: dict, key: str, m: str) -> str:
        return f"{r[key][m]:.3f}" if m in r[key] else "-"

    md = ["# gradsmith's eager verdict vs gradcheck + gradgradcheck, seconds per Function "
          "(issue 18)", "",
          f"`python benchmarks/check_eager_cost.py --baseline`; torch {env['torch']}, "
          f"{env['cpu_count']} CPUs shared with other engineers' work (load below). One "
          "process, a warm-up pass, then per pass each Function timed in every mode one after "
          "another (interleaved); per-Function medians of the passes, then their median and "
          "mean over the Functions. `before` modes: the same code with issue 18's speed-ups "
          "switched off (no random-direction screen, host random states restored around every "
          "call; from the `batched surrogate fit` runs on, also the smooth surrogate fit one "
          "slope at a time); `scalar fit`: only that last one switched off; `explained "
          "again`: a further input set explaining again what an earlier set reported (and "
          "second order re-judging every disagreeing element), as before e5cf967 "
          "(`--explained`). Runs named "
          "`corpus 3 dev half` time the development half of the third corpus (`--corpus`, "
          "zero-config only: no registered inputs) instead of the catalog.", "",
          "| run | when | load (1 min) before / after | passes | statistic | "
          + " | ".join(every) + " |", "|---|---|---|---:|---|" + "---:|" * len(every)]
    for label, r in runs.items():
        md.append(f"| {label} | {r['when']} | {r['load_before']} / {r['load_after']} | "
                  f"{r['repeat']} | median | "
                  + " | ".join(cell(r, "median_per_function", m) for m in every) + " |")
        md.append("| | | | | mean | "
                  + " | ".join(cell(r, "mean_per_function", m) for m in every) + " |")
    notes = [f"- `{label}`: {r['note']}" for label, r in runs.items() if r.get("note")]
    md += ["", *notes] if notes else []
    last_label, last = list(runs.items())[-1]
    modes = list(last["median_per_function"])
    md += ["", f"Per Function, run `{last_label}` (median seconds, or as its note says):", "",
           "| Function | " + " | ".join(modes) + " |", "|---|" + "---:|" * len(modes)]
    for name in last["functions"]:
        md.append(f"| {name} | " + " | ".join(
            f"{last['per_function'][m].get(name, float('nan')):.3f}" for m in modes) + " |")
    mutants_file = RESULTS / "check_eager_mutants.json"
    if mutants_file.exists():
        found = json.loads(mutants_file.read_text())
        md += ["", "Sensitivity (`--mutants`, registered inputs, eager verdict): planted bugs "
               "killed with the screen and without it (element-by-element only).", "",
               "| mutation | with screen | without screen |", "|---|---:|---:|"]
        for kind, (killed, total) in found["counts"]["screen"].items():
            other = found["counts"]["no screen"][kind]
            md.append(f"| {kind} | {killed} / {total} | {other[0]} / {other[1]} |")
        md += ["", f"Mutants whose verdict differs between the two: {len(found['differ'])}"
               + (f" ({'; '.join(found['differ'])})" if found["differ"] else "") + ". "
               "`one element +1e-4` survives where 1e-4 is within the checker's tolerance "
               "(`atol + rtol * |.|`) in both."]
        if found.get("note"):
            md += ["", found["note"]]
    return "\n".join(md) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--functions", type=int, default=None, help="only the first N")
    parser.add_argument("--label", default="current", help="row name in the results")
    parser.add_argument("--profile", choices=MODES[:2], help="cProfile one mode instead")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--mutants", action="store_true", help="kill rate, screen on/off")
    parser.add_argument("--baseline", action="store_true",
                        help="also time both eager verdicts without issue 18's speed-ups")
    parser.add_argument("--corpus", type=Path, default=None,
                        help="time corpus 3's development half (zero-config) from this folder")
    parser.add_argument("--explained", action="store_true",
                        help="zero-config only, against the repeated explanations switched "
                             "back on (interleaved)")
    parser.add_argument("--split", default="check_corpus3",
                        help="with --corpus: the corpus whose development half is timed "
                             "(results/SPLIT_split.json, e.g. check_corpus4b)")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    if args.mutants:
        found = mutants()
        print(json.dumps(found, indent=1))
        if not args.no_write:
            (RESULTS / "check_eager_mutants.json").write_text(json.dumps(found, indent=1) + "\n")
            render()
        return
    if args.profile:
        profile(args.profile, args.functions, args.top)
        return
    modes = MODES + BASELINE + SCALAR_FIT if args.baseline else MODES
    if args.explained:
        modes = ("zero-config",) + EXPLAINED
    if args.corpus is not None:  # no registered inputs: zero-config only
        modes = tuple(m for m in modes if m.startswith("zero-config"))
    result = measure(args.repeat, args.functions, modes, args.corpus, args.split)
    result["when"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(json.dumps({k: result[k] for k in ("when", "load_before", "load_after",
                                             "median_per_function", "mean_per_function")}))
    if args.no_write:
        return
    path = RESULTS / "check_eager_cost.json"
    runs = json.loads(path.read_text()) if path.exists() else {}
    runs[args.label] = result
    path.write_text(json.dumps(runs, indent=1) + "\n")
    (RESULTS / "check_eager_cost.md").write_text(_markdown(runs))


def render() -> None:
    """Rewrite the markdown from the recorded JSON (after a ``--mutants`` run)."""
    runs = json.loads((RESULTS / "check_eager_cost.json").read_text())
    (RESULTS / "check_eager_cost.md").write_text(_markdown(runs))


if __name__ == "__main__":
    main()
