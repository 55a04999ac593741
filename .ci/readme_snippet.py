"""Print the fenced block of a Markdown file that starts with a given first line, verbatim.

    python .ci/readme_snippet.py README.md "# .pre-commit-config.yaml"

.ci/install-smoke pastes the README's pre-commit snippet exactly as a user copies it; the
tests use the same function (tests/cli/test_precommit_snippet.py).
"""

from __future__ import annotations

import sys
from pathlib import Path


def snippet(path: str | Path, first_line: str) -> str:
    """The text of the first fenced code block whose first line is ``first_line``."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if line.startswith("```") and i + 1 < len(lines) and lines[i + 1] == first_line:
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            return "\n".join(lines[i + 1:end]) + "\n"
    raise SystemExit(f"{path}: no fenced block starting with {first_line!r}")


if __name__ == "__main__":
    sys.stdout.write(snippet(sys.argv[1], sys.argv[2]))
