"""The documentation a newcomer reads: README.md as a short front door with its picture, every
page under docs/ reachable from it in one click, no link in them that leads nowhere, the
README's clients table the same as docs/clients.md's, every server flag in the flags table, and
every `make` target, `python -m` module and repository path the pages name present, and every
row of the benchmarks' results table with a date, a commit and a command."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

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


REPO_PATH = re.compile(r"`((?:\.ci|benchmarks|calibration|deploy|docs|server|tests|web)/[\w./-]*)`")
"""A path inside the repository written in a code span: `server/realtime/session.py`."""


def first_column_table(page: Path, header: str) -> dict[str, str]:
    """Rows of the table of `page` whose header row starts with `| {header} |`: the first code
    span of the row's first cell -> its second cell, stripped."""
    rows: dict[str, str] = {}
    inside = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith(f"| {header} |"):
            inside = True
        elif inside and not line.startswith("|"):
            break
        elif inside and not line.startswith("|---"):
            cells = [cell.strip() for cell in line.strip("|").split(" | ")]
            name = re.search(r"`([^`]+)`", cells[0])
            assert name is not None, line
            rows[name.group(1)] = cells[1]
    return rows


def test_the_readme_lists_every_tested_client_at_its_tested_version() -> None:
    tested = first_column_table(DOCS / "clients.md", "client")
    listed = first_column_table(README, "client")
    assert len(tested) >= 7
    assert list(listed) == list(tested)
    version = re.compile(r"this repository|\d+\.\d+\.\d+")
    for name, cell in tested.items():
        expected = version.match(cell)
        assert expected is not None, (name, cell)
        assert listed[name] == expected.group(0), (name, listed[name], cell)


def test_every_server_flag_is_in_the_flags_table(monkeypatch: pytest.MonkeyPatch) -> None:
    from server.config import build_parser

    monkeypatch.setenv("COLUMNS", "1000")  # argparse wraps the help at the terminal's width

    flags_page = (DOCS / "running.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(--[a-z][a-z-]*)", flags_page, flags=re.MULTILINE)
    refused = {"--api-key"}  # refused on the command line: the `--api-key-file` row says so
    options = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", build_parser({}).format_help()))
    options.discard("--help")
    assert options - refused <= set(rows), sorted(options - refused - set(rows))
    assert all(re.search(rf"`{flag}[` ]", flags_page) for flag in refused)


def test_every_command_module_and_path_the_pages_name_exists() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([a-z][a-z-]*):", makefile, flags=re.MULTILINE))
    missing = []
    for page in pages():
        text = page.read_text(encoding="utf-8")
        for target in re.findall(r"(?:^|`)make ([a-z][a-z-]*)", text, flags=re.MULTILINE):
            if target not in targets:
                missing.append(f"{page.name}: make {target}")
        for module in re.findall(r"-m (benchmarks|docs)\.(\w+)", text):
            if module[1] != "NAME" and not (ROOT / module[0] / f"{module[1]}.py").exists():
                missing.append(f"{page.name}: python -m {'.'.join(module)}")
        for name in re.findall(r"`((?:bench|fuzz)_[a-z_]+)", text):
            if not (ROOT / "benchmarks" / f"{name}.py").exists():
                missing.append(f"{page.name}: {name}")
        for path in REPO_PATH.findall(text):
            if not (ROOT / path).exists():
                missing.append(f"{page.name}: {path}")
    assert not missing, missing


def test_every_benchmark_result_has_a_date_a_commit_and_a_command() -> None:
    page = ROOT / "benchmarks" / "README.md"
    rows = [line for line in page.read_text(encoding="utf-8").split("## Methods")[0].splitlines()
            if line.startswith("| ") and not line.startswith("| measure |")]
    assert len(rows) >= 30
    bad = []
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split(" | ")]
        if (len(cells) != 6 or not re.fullmatch(r"\d{4}-\d\d-\d\d, \*?[0-9a-f]{7,40}\*?", cells[3])
                or not re.match(r"`(?:bench|fuzz)_\w+", cells[5])):
            bad.append(row[:80])
    assert not bad, bad
