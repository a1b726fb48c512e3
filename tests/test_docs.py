"""The documentation a newcomer reads: README.md as a short front door with its picture, every
page under docs/ reachable from it in one click, and no link in them that leads nowhere."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 150
"""Issue 28: the README is a front door, not the manual."""

LINK = re.compile(r"\]\(([^)\s]+)\)")
"""Markdown inline links and images: `[text](target)` / `![alt](target)`."""


def pages() -> list[Path]:
    """README.md, docs/*.md and benchmarks/README.md."""
    return [README, *sorted(DOCS.glob("*.md")), ROOT / "benchmarks" / "README.md"]


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation but `-` and `_` dropped,
    spaces to `-`."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
            for heading in headings}


def local_links(page: Path) -> list[tuple[Path, str]]:
    """(target file, anchor or "") of every relative link of `page` (web links left out)."""
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"),
                  flags=re.MULTILINE | re.DOTALL)
    found = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = unquote(target).partition("#")
        found.append(((page.parent / path).resolve() if path else page, anchor))
    return found


def test_the_readme_is_short_and_shows_the_page() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_README_LINES
    picture = re.search(r"!\[[^\]]+\]\(([^)]+\.png)\)", text)
    assert picture is not None, "the README shows the page"
    assert (ROOT / picture.group(1)).stat().st_size > 10_000


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = {target for target, _ in local_links(README)}
    missing = [page.name for page in DOCS.glob("*.md") if page.resolve() not in linked]
    assert not missing, missing


def test_every_relative_link_leads_to_a_file_and_heading() -> None:
    broken = []
    for page in pages():
        for target, anchor in local_links(page):
            if not target.exists():
                broken.append(f"{page.name} -> {target}")
            elif anchor and target.suffix == ".md" and anchor not in anchors(target):
                broken.append(f"{page.name} -> {target.name}#{anchor}")
    assert not broken, broken
