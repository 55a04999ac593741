"""docs/lint.md is generated from the registry; regenerate with the command below."""

from pathlib import Path

from gradsmith.linter.docs import generate

DOCS = Path(__file__).parents[2] / "docs" / "lint.md"


def test_docs_are_up_to_date():
    assert DOCS.read_text(encoding="utf-8") == generate(), (
        "docs/lint.md is stale: run `python -m gradsmith.linter.docs > docs/lint.md`"
    )
