"""The README and scenes/README.md point only at files in the repository (issue 19: the
README linked an ARCHITECTURE.md that lies outside it, so a clone could not follow it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# markdown links and images: [text](target); and documents named in backticks (`x/README.md`)
LINK = re.compile(r"\]\(([^)#\s]+)[^)]*\)|`([^`\s]+\.md)`")


@pytest.mark.parametrize("doc", ["README.md", "scenes/README.md", "bench/README.md"])
def test_documents_point_only_inside_the_repository(doc: str) -> None:
    path = REPO / doc
    bad = []
    for match in LINK.finditer(path.read_text(encoding="utf-8")):
        target = match.group(1) or match.group(2)
        if "://" in target or target.startswith(("mailto:", "outputs/", "~")) or "<" in target:
            continue
        found = [base / target for base in (path.parent, REPO) if (base / target).exists()]
        inside = [f for f in found if f.resolve().is_relative_to(REPO)]
        if not inside:
            bad.append(target)
    assert not bad, f"{doc} names files that are not in the repository: {bad}"
