"""The repository stands alone: no tracked file points outside the checkout, every relative
link of the documentation resolves, and the study's own account (docs/study.md) carries its
bibliography and cites only entries it has."""

from __future__ import annotations

import re
import subprocess
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Spelled in parts so that this file does not name them itself: the sibling folder this
# project's machines keep beside the checkout, and the spec documents that lived there.
OUTSIDE = "/".join(("..", "shared"))
OUTSIDE_DOCS = tuple(name + ".md" for name in ("STUDY", "DESIGN"))
STUDY = ROOT / "docs" / "study.md"
# ](target) of a Markdown link or image; the target ends at whitespace or ')'
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
EXPLICIT_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
CODE_FENCE = re.compile(r"^(```|~~~)")


def _tracked() -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as err:
        # the project is a git checkout wherever it is tested (CI clones it)
        pytest.fail(f"git ls-files failed in {ROOT}: {err}")
    return [p for p in out.decode().split("\0") if p]


def _text(path: Path) -> str | None:
    """The file's text, or None for a binary (or unreadable) file."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _prose(text: str) -> str:
    """The Markdown without its fenced code blocks (links inside them are not links)."""
    keep, fenced = [], False
    for line in text.splitlines():
        if CODE_FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            keep.append(line)
    return "\n".join(keep)


def _links(text: str) -> list[str]:
    return LINK.findall(re.sub(r"`[^`\n]*`", "", _prose(text)))


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, markup and punctuation dropped, spaces to '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = unicodedata.normalize("NFKC", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(text: str) -> set[str]:
    heads = [m.group(1) for m in re.finditer(r"^#{1,6}\s+(.*?)\s*#*\s*$", _prose(text), re.M)]
    return {_slug(h) for h in heads} | set(EXPLICIT_ANCHOR.findall(text))


def _docs() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_no_tracked_file_points_outside_the_checkout():
    offenders = []
    for rel in _tracked():
        if rel.startswith(".ci/"):
            continue
        text = _text(ROOT / rel)
        if text is None:
            continue
        offenders += [f"{rel}:{n}" for n, line in enumerate(text.splitlines(), 1)
                      if any(name in line for name in (OUTSIDE, *OUTSIDE_DOCS))]
    assert not offenders, (f"tracked files name {OUTSIDE!r} or {OUTSIDE_DOCS}, outside the repository "
                           "(cite docs/study.md or docs/architecture.md):\n" + "\n".join(offenders))


@pytest.mark.parametrize("doc", _docs(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_markdown_links_resolve(doc):
    assert doc.exists(), f"{doc} is missing"
    broken = []
    for target in _links(doc.read_text(encoding="utf-8")):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
            continue  # a URL (http:, mailto:, ...) or an anchor of the same page (checked for study.md)
        path = target.split("#", 1)[0].split("?", 1)[0]
        resolved = (doc.parent / path).resolve()
        if not resolved.exists():
            broken.append(target)
        elif ROOT not in resolved.parents and resolved != ROOT:
            broken.append(f"{target} (outside the checkout)")
    assert not broken, f"{doc.relative_to(ROOT)} links to files that do not exist: {broken}"


def test_study_has_a_bibliography_that_resolves_every_citation():
    text = STUDY.read_text(encoding="utf-8")
    match = re.search(r"^## Bibliography\s*$(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, "docs/study.md has no '## Bibliography' section"
    entries = set(EXPLICIT_ANCHOR.findall(match.group(1)))
    assert len(entries) >= 10, f"the bibliography has {len(entries)} anchored entries"
    # A citation is a link to an anchor of the bibliography: [Author Year](#key) in this page,
    # docs/study.md#key from the other pages.
    cited = {t[1:] for t in _links(text) if t.startswith("#")}
    anchors = _anchors(text)
    unknown = sorted(cited - anchors)
    assert not unknown, f"docs/study.md links to anchors it does not have: {unknown}"
    citations = {k for k in cited if k not in _anchors(text.replace(match.group(0), ""))}
    assert citations <= entries, f"citations without a bibliography entry: {sorted(citations - entries)}"
    uncited = sorted(entries - cited)
    assert not uncited, f"bibliography entries that docs/study.md never cites: {uncited}"
    for doc in _docs():
        for target in _links(doc.read_text(encoding="utf-8")):
            path, _, anchor = target.partition("#")
            if anchor and path and (doc.parent / path).resolve() == STUDY:
                assert anchor in anchors, f"{doc.relative_to(ROOT)}: docs/study.md#{anchor} does not exist"


def test_report_captions_cite_the_study_not_an_outside_file():
    """The figure captions of the HTML report name their figure in docs/study.md."""
    anchors = _anchors(STUDY.read_text(encoding="utf-8"))
    captions = sorted((ROOT / "workflow" / "report").glob("*.rst"))
    assert captions
    numbered = []
    for caption in captions:
        text = caption.read_text(encoding="utf-8")
        named = [n for n in (OUTSIDE, *OUTSIDE_DOCS) if n in text]
        assert not named, f"{caption.name} cites files outside the repository: {named}"
        for anchor in re.findall(r"docs/study\.md#([\w-]+)", text):
            assert anchor in anchors, f"{caption.name} cites docs/study.md#{anchor}, which does not exist"
        if re.search(r"\bfigures? \d", text):
            numbered.append(caption.name)
            assert "docs/study.md#figures" in text, f"{caption.name} numbers a figure without docs/study.md#figures"
    assert len(numbered) >= 6, f"only {numbered} cite the study's figures"
