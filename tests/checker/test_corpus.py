"""Every corpus Function gets the expected verdict and the expected finding code."""

import pytest
import torch
from corpus import all_cases

import gradsmith

CASES = all_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_corpus_verdict(case):
    args = case.make_args()
    before = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    report = gradsmith.check(case.fn, *args, surrogate=case.surrogate, **case.options)
    assert report.passed == case.passes, str(report)
    if case.codes:
        assert report.codes() & set(case.codes), str(report)
    if not case.passes:
        assert report.codes("error") & set(case.codes), str(report)
    for a, b in zip(args, before):  # the user's tensors are never modified
        if isinstance(a, torch.Tensor):
            assert torch.equal(a, b)


def test_corpus_size_and_coverage():
    assert len(CASES) >= 40
    assert len({c.name for c in CASES}) == len(CASES)
    # Every bug class (the primary code of a failing case, or the warning of a passing one)
    # has at least two Functions.
    primary = [c.codes[0] for c in CASES if c.codes and (not c.passes or c.codes[0] in {
        "tensor-on-ctx", "ctx-leak", "unneeded-grad", "broadcast-grad",
        "double-backward-unsupported"})]
    thin = {code for code in primary if primary.count(code) < 2}
    assert thin == set()
