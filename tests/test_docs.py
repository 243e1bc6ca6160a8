"""The python snippets in docs/ run, top to bottom, as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.glob("*.md")))
def test_snippets_run(page):
    text = (DOCS / page).read_text()
    snippets = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    namespace: dict = {}
    for i, snippet in enumerate(snippets):
        exec(compile(snippet, f"{page} snippet {i + 1}", "exec"), namespace)
