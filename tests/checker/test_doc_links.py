"""Every ``docs/*.md#anchor`` link gradsmith's messages give (and every anchor link in README and
docs/) lands on a heading or an explicit anchor (issue 21: findings linked
``docs/check.md#torch_func``, which did not exist)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CODE_LINK = re.compile(r"(?:docs/)?([\w-]+\.md)#([\w.-]*\w)")
DOC_LINK = re.compile(r"\]\(([^)#\s]*\.md)?#([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces -> '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(md: Path) -> set[str]:
    text = md.read_text(encoding="utf-8")
    found, seen = set(), {}
    for heading in re.findall(r"^#{1,6}\s+(.*)$", text, re.M):
        slug = _slug(heading)
        found.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return found | set(re.findall(r'<a (?:id|name)="([^"]+)"', text))


def test_slugs_follow_githubs_rule():
    assert _slug("torch_func (column torch.func)") == "torch_func-column-torchfunc"
    assert _slug("`--approximate`") == "--approximate"


def test_links_in_gradsmiths_messages_land_on_an_anchor():
    links = set()
    for path in (ROOT / "src" / "gradsmith").rglob("*.py"):
        links |= {(path.name, doc, anchor) for doc, anchor in
                  CODE_LINK.findall(path.read_text(encoding="utf-8"))}
    broken = [(src, f"docs/{doc}#{anchor}") for src, doc, anchor in sorted(links)
              if not (ROOT / "docs" / doc).is_file()
              or anchor not in _anchors(ROOT / "docs" / doc)]
    assert broken == []


def test_anchor_links_in_readme_and_docs_land():
    broken = []
    for md in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target, anchor in DOC_LINK.findall(md.read_text(encoding="utf-8")):
            doc = md.parent / target if target else md
            if not doc.is_file() or anchor not in _anchors(doc):
                broken.append((md.name, f"{target}#{anchor}"))
    assert broken == []


def _strings_that_are_not_docstrings(tree: ast.AST) -> list[str]:
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                       ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)}
    return [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
            and isinstance(node.value, str) and id(node) not in docstrings]


def test_no_message_sends_a_pip_user_to_docs_check_md():
    """A pip install has no docs/ folder: messages, hints and SARIF help name
    ``gradsmith check --explain CODE`` instead (the functorch hint named
    ``docs/check.md#torch_func``)."""
    found = []
    for path in (ROOT / "src" / "gradsmith").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [(path.name, text) for text in _strings_that_are_not_docstrings(tree)
                  if "check.md" in text]
    assert found == []
