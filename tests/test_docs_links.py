"""Every relative link and anchor in the repository's markdown resolves (issue 50), and the READMEs stay short.

A link ``[text](path#anchor)`` in any ``*.md`` file must name a file or folder that exists, relative to the file
that holds it, and its ``#anchor`` must match a heading of the target markdown file under GitHub's slug rules:
lowercase, every character dropped except letters, digits, marks, spaces, ``-`` and ``_``, spaces turned into ``-``,
and a repeated heading suffixed ``-1``, ``-2``, ... Links inside code (fenced blocks and inline code spans) are not
links. URLs with a scheme (``https:``, ``mailto:``) are left alone: the test uses no network.
"""

from __future__ import annotations

import os
import re
import unicodedata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# What is not the repository's own documentation: environments, git, run outputs, caches and build products.
SKIP_DIRS = {
    ".venv",
    ".venv-vllm",
    ".git",
    "runs",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".hypothesis",
}
SKIP_TOP_DIRS = {"build", "outputs"}  # ignored at the repository's root only (.gitignore)
SKIP_SUFFIXES = (".egg-info",)

_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
# [text](target) and ![alt](target); the text may hold one level of brackets, e.g. [`x[0]`](y).
_INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*(\S+)")
_HTML_ID = re.compile(r"<a\s+(?:[^>]*\s)?(?:id|name)=\"([^\"]+)\"", re.IGNORECASE)
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def markdown_files(root: Path) -> list[Path]:
    """All ``*.md`` files under ``root``, outside the skipped folders (never walked into), in a stable order."""
    found = []
    for folder, dirs, files in os.walk(root):
        at_top = Path(folder) == root
        dirs[:] = [
            d
            for d in dirs
            if d not in SKIP_DIRS and not d.endswith(SKIP_SUFFIXES) and not (at_top and d in SKIP_TOP_DIRS)
        ]
        found.extend(Path(folder) / name for name in files if name.endswith(".md"))
    return sorted(found)


def _prose_lines(text: str) -> list[tuple[int, str]]:
    """The lines outside fenced code blocks, numbered from 1."""
    lines, fence = [], None
    for number, line in enumerate(text.splitlines(), start=1):
        match = _FENCE.match(line)
        if fence is None and match:
            fence = match.group(1)[0] * len(match.group(1))
            continue
        if fence is not None:
            if line.strip().startswith(fence) and set(line.strip()) <= {fence[0]}:
                fence = None
            continue
        lines.append((number, line))
    return lines


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading's text (before the suffix of a repeated heading)."""
    text = _CODE_SPAN.sub(lambda m: m.group(2), heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading keeps its text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML tags
    kept = []
    for char in text.lower():
        category = unicodedata.category(char)
        if category[0] in "LMN" or category == "Pc" or char in " -":
            kept.append(char)
    return "".join(kept).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor of a markdown file: its headings' slugs, repeats suffixed, and explicit HTML ids."""
    seen: dict[str, int] = {}
    found = set()
    for _, line in _prose_lines(path.read_text(encoding="utf-8")):
        match = _HEADING.match(line)
        if match:
            slug = github_slug(match.group(2))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(slug if count == 0 else f"{slug}-{count}")
        found.update(_HTML_ID.findall(line))
    return found


def links(path: Path) -> list[tuple[int, str]]:
    """The (line, target) of every link in a markdown file's prose, code spans left out."""
    found = []
    for number, line in _prose_lines(path.read_text(encoding="utf-8")):
        prose = _CODE_SPAN.sub("", line)
        for match in _INLINE_LINK.finditer(prose):
            found.append((number, match.group(1).strip("<>")))
        match = _REFERENCE_DEF.match(prose)
        if match:
            found.append((number, match.group(1).strip("<>")))
    return found


def broken_links(root: Path) -> list[str]:
    """One line per relative link under ``root`` whose file or anchor does not exist."""
    problems = []
    anchor_cache: dict[Path, set[str]] = {}
    for source in markdown_files(root):
        for number, target in links(source):
            if _SCHEME.match(target) or target.startswith("//"):
                continue
            file_part, _, anchor = target.partition("#")
            resolved = (source.parent / file_part).resolve() if file_part else source
            where = f"{source.relative_to(root)}:{number}: {target}"
            if not resolved.exists():
                problems.append(f"{where}: no such file or folder")
                continue
            if anchor and resolved.is_file() and resolved.suffix == ".md":
                if resolved not in anchor_cache:
                    anchor_cache[resolved] = anchors(resolved)
                if anchor not in anchor_cache[resolved]:
                    problems.append(f"{where}: no heading with the anchor #{anchor}")
    return problems


# The READMEs stay readable: none longer than a few screens, and all together a bounded read (issue: README trim).
README_MAX_LINES = 300
READMES_TOTAL_MAX_LINES = 2000


def readme_line_counts(root: Path) -> dict[str, int]:
    """Lines of every ``README*.md`` under ``root`` (the link test's walk and exclusions), by repository path."""
    return {
        str(path.relative_to(root)): len(path.read_text(encoding="utf-8").splitlines())
        for path in markdown_files(root)
        if path.name.startswith("README")
    }


def test_every_readme_is_short_and_all_of_them_together_are_bounded():
    counts = readme_line_counts(REPO)
    assert "README.md" in counts  # the walk found the top README at all
    listing = "\n".join(f"{lines:5d}  {path}" for path, lines in sorted(counts.items(), key=lambda kv: -kv[1]))
    total = sum(counts.values())
    too_long = {path: lines for path, lines in counts.items() if lines > README_MAX_LINES}
    assert not too_long, f"READMEs over {README_MAX_LINES} lines: {too_long}\nall READMEs:\n{listing}"
    assert total <= READMES_TOTAL_MAX_LINES, (
        f"READMEs total {total} lines, over {READMES_TOTAL_MAX_LINES}:\n{listing}\n{total:5d}  total"
    )


def test_readme_line_counts_take_only_readmes_and_skip_run_outputs(tmp_path):
    (tmp_path / "README.md").write_text("a\nb\n", encoding="utf-8")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "README.md").write_text("one line\n", encoding="utf-8")
    (tmp_path / "pkg" / "notes.md").write_text("x\n" * 500, encoding="utf-8")
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "README.md").write_text("x\n" * 500, encoding="utf-8")
    assert readme_line_counts(tmp_path) == {"README.md": 2, "pkg/README.md": 1}


def test_every_relative_link_and_anchor_in_the_repository_resolves():
    files = markdown_files(REPO)
    assert REPO / "README.md" in files  # the walk found the documentation at all
    problems = broken_links(REPO)
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_a_broken_file_or_anchor_is_reported_and_a_good_one_is_not(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "target.md").write_text(
        "# Target page\n\n## Results: BOTS vs Random (8 seeds)\n\n## `bots_warm` and λ\n\n## Notes\n\n## Notes\n",
        encoding="utf-8",
    )
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "ignored.md").write_text("[gone](nowhere.md)\n", encoding="utf-8")
    (tmp_path / "README.md").write_text(
        "\n".join(
            [
                "# Top",
                "[ok](docs/target.md) [ok anchor](docs/target.md#results-bots-vs-random-8-seeds)",
                "[ok code](docs/target.md#bots_warm-and-λ) [second notes](docs/target.md#notes-1) [folder](docs/)",
                "[self](#top) [web](https://example.com/missing.md) `[in code](missing.md)`",
                "```",
                "[in a fence](missing.md)",
                "```",
                "[missing file](docs/missing.md)",
                "[missing anchor](docs/target.md#no-such-section)",
                "[missing self anchor](#nowhere)",
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    problems = broken_links(tmp_path)
    assert problems == [
        "README.md:8: docs/missing.md: no such file or folder",
        "README.md:9: docs/target.md#no-such-section: no heading with the anchor #no-such-section",
        "README.md:10: #nowhere: no heading with the anchor #nowhere",
    ]


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        ("Beyond the paper on testbed v2", "beyond-the-paper-on-testbed-v2"),
        ("Beyond the paper: `bots_plus`", "beyond-the-paper-bots_plus"),
        ("Asynchronous modes (`colocate_async`, `separate_async`)", "asynchronous-modes-colocate_async-separate_async"),
        ("5. The paper's methods and ablations", "5-the-papers-methods-and-ablations"),
        ("Easy→hard, ρ and λ", "easyhard-ρ-and-λ"),
    ],
)
def test_github_slug_rules(heading, slug):
    assert github_slug(heading) == slug
