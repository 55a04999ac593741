"""An int parameter forward views rows by (``t.view(-1, dim)``) is the size of a row: the first
tensor's last size, not ``dim = -1`` (two inferred sizes) or a float. vqnn's vector-quantised
activations (rows of ``dim`` replaced by a codeword of a ``(K, dim)`` codebook, identity
backward) were skipped (corpus 7b dev, issue 18)."""

from __future__ import annotations

import importlib.util
import re
import textwrap

import pytest
import torch

import gradsmith
from gradsmith.discovery import Synthesized, synthesize

CASE = '''
import torch


def nearest(q, book):
    ip = q.mm(book.transpose(0, 1))
    codes = torch.argmax(ip, dim=1)
    return codes, ip.gather(dim=1, index=codes.view(-1, 1))


class RowQuantize(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor_, dim, code_book):
        tensor = tensor_.clone()
        x = tensor.view(-1, dim)
        codes, u = nearest(x, code_book)
        torch.index_select(code_book, 0, codes, out=x[:, :])
        x *= u
        return tensor

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, None, None
'''


@pytest.fixture(scope="module")
def fn(tmp_path_factory):
    path = tmp_path_factory.mktemp("row_size") / "vq.py"
    path.write_text(textwrap.dedent(CASE))
    spec = importlib.util.spec_from_file_location("row_size_case", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # source must be readable: the hints parse it
    return module.RowQuantize


def test_the_row_size_is_the_first_tensors_last_size(fn):
    found = synthesize(fn)
    assert isinstance(found, Synthesized), found
    t, dim, book = found.args
    assert dim == t.shape[-1] and book.shape[-1] == dim
    # forward as written by hand: each row times its best codeword, scaled by the inner product
    rows = t.detach().reshape(-1, dim)
    ip = rows @ book.T
    best = ip.argmax(1)
    want = book[best] * ip.gather(1, best[:, None])
    torch.testing.assert_close(fn.apply(t, dim, book).reshape(-1, dim), want)


def test_the_straight_through_declaration_passes_as_printed(fn):
    found = synthesize(fn)
    report = gradsmith.check(fn, *found.args)
    assert report.codes("error") == {"undeclared-estimator"}, str(report)
    (f,) = report.errors
    factory, source = re.search(r"example\((lambda: .*), surrogate=(lambda .*)\)$",
                                f.details["declaration"]).groups()
    args = eval(factory, {"torch": torch})()  # noqa: S307 - gradsmith's own line, as printed
    assert gradsmith.check(fn, *args, surrogate=eval(source, {"torch": torch})).passed  # noqa: S307
