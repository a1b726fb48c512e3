"""The page's vendored libraries (web/vendor/) are the versions package.json pins, with licences.

The page has no build step and CI installs no npm packages: `make web-vendor` copies marked and
DOMPurify from node_modules (installed by `npm ci` from package-lock.json) into web/vendor/ and
the copies are committed. Each copy names its version in its licence header; this checks that
it is the one package.json and package-lock.json pin, and that its licence file is next to it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VENDOR = ROOT / "web" / "vendor"
FILES = {
    "marked": ("marked.esm.js", r"marked v(\d+\.\d+\.\d+)", "marked.LICENSE", "MIT license"),
    "dompurify": ("purify.es.mjs", r"DOMPurify (\d+\.\d+\.\d+)", "dompurify.LICENSE",
                  "Apache License"),
}
"""npm package -> (vendored file, its version in the header, licence file, licence words)."""


@pytest.mark.parametrize("package", sorted(FILES))
def test_vendored_copy_is_the_pinned_version(package: str) -> None:
    name, version_pattern, licence, licence_words = FILES[package]
    pinned = json.loads((ROOT / "package.json").read_text(encoding="utf-8"))["dependencies"]
    lock = json.loads((ROOT / "package-lock.json").read_text(encoding="utf-8"))
    assert re.fullmatch(r"\d+\.\d+\.\d+", pinned[package]), "an exact version, no range"
    assert lock["packages"][f"node_modules/{package}"]["version"] == pinned[package]
    header = (VENDOR / name).read_text(encoding="utf-8")[:600]
    found = re.search(version_pattern, header)
    assert found and found.group(1) == pinned[package]
    assert licence_words in (VENDOR / licence).read_text(encoding="utf-8")


def test_page_imports_only_vendored_copies() -> None:
    """Every import of the page's modules is a relative path inside web/ (no CDN, no bare
    package name: the page's Content-Security-Policy allows its own origin only)."""
    for module in sorted((ROOT / "web").glob("*.js")):
        for target in re.findall(r"^import[^'\"]*['\"]([^'\"]+)['\"]", module.read_text(
                encoding="utf-8"), re.MULTILINE):
            assert target.startswith("./"), (module.name, target)
            assert (module.parent / target).resolve().is_file(), (module.name, target)
