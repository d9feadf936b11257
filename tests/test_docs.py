"""The repository's references stay inside it: code, tests and docs cite sections of docs/semantics.md that
exist (as `docs/semantics.md §N` or `§N.M`), never documents outside the repository, and the README lists every
document in docs/."""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = "docs/semantics.md"

HEADING = re.compile(r"^(#{2,3}) (\d+(?:\.\d+)?)\.? ", re.M)
SECTION_SIGN = re.compile(r"§(\d+(?:\.\d+)*)")
CITATION = re.compile(r"docs/semantics\.md((?:[\s,]*(?:and\s+)?§\d+(?:\.\d+)*)+)")
# documents that live outside the repository (the team's notes beside it) must not be cited
OUTSIDE = re.compile(r"\bSEMANTICS\b|\bDESIGN\.md\b|(?:\.\./|/work/)shared/[\w./-]*\.md")


@pytest.fixture(scope="module")
def files() -> dict[str, str]:
    """Every tracked file's text (this module excepted: it spells out the forbidden names)."""
    try:
        listing = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the repository's file list is unknown")
    this = Path(__file__).resolve().relative_to(ROOT).as_posix()
    paths = [p for p in listing.decode().split("\0") if p and p != this and (ROOT / p).is_file()]
    return {p: (ROOT / p).read_text(encoding="utf-8", errors="replace") for p in paths}


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def sections(text: str) -> list[tuple[int, str]]:
    """(level, number) of the numbered headings of docs/semantics.md, in order."""
    return [(len(m.group(1)), m.group(2)) for m in HEADING.finditer(text)]


def test_no_citation_of_documents_outside_the_repository(files: dict[str, str]) -> None:
    found = [f"{path}:{line_of(text, m.start())}: {m.group(0)}"
             for path, text in files.items() for m in OUTSIDE.finditer(text)]
    assert not found, "cite docs/semantics.md sections instead of documents outside the repository:\n" + \
        "\n".join(found)


def test_semantics_sections_are_numbered_in_order(files: dict[str, str]) -> None:
    expected, chapter, sub = [], 0, 0
    for level, _ in sections(files[REFERENCE]):
        if level == 2:
            chapter, sub = chapter + 1, 0
            expected.append((level, str(chapter)))
        else:
            sub += 1
            expected.append((level, f"{chapter}.{sub}"))
    assert sections(files[REFERENCE]) == expected and len(expected) > 20


def test_citations_name_existing_sections(files: dict[str, str]) -> None:
    """Every `docs/semantics.md §N` names a heading of docs/semantics.md (its own `§N` references too); a
    numbered section sign elsewhere that is not such a citation is ambiguous and reported as well."""
    existing = {number for _, number in sections(files[REFERENCE])}
    bad = []
    for path, text in files.items():
        cited = [(m.start(1), m.group(1)) for m in CITATION.finditer(text)]
        if path == REFERENCE:
            cited = [(0, text)]
        covered = [(start, start + len(group)) for start, group in cited]
        for start, group in cited:
            bad += [f"{path}:{line_of(text, start + m.start())}: §{m.group(1)} is not a section of {REFERENCE}"
                    for m in SECTION_SIGN.finditer(group) if m.group(1) not in existing]
        bad += [f"{path}:{line_of(text, m.start())}: §{m.group(1)} does not say which document it cites "
                f"(write `{REFERENCE} §{m.group(1)}`)"
                for m in SECTION_SIGN.finditer(text) if not any(a <= m.start() < b for a, b in covered)]
    assert not bad, "\n".join(bad)


def test_readme_lists_every_document(files: dict[str, str]) -> None:
    documents = sorted(p for p in files if p.startswith("docs/") and p.endswith(".md"))
    assert documents and [p for p in documents if f"`{p}`" not in files["README.md"]] == []
