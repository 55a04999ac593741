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
    bugs = [c for c in CASES if not c.passes]
    codes = [code for c in bugs for code in c.codes[:1]]
    for code in set(codes):
        assert codes.count(code) >= 1
    assert len({c.name for c in CASES}) == len(CASES)
