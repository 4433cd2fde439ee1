"""Every link in the README and ``docs/`` resolves: relative files exist, ``#anchors`` name a heading or an
``<a id>`` of the target page, and every ``docs/design.md#<anchor>`` the code cites is there.

``python -m scix_core.devtools.links`` (run by ``make check``); exit 1 and one line per broken link.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CITED = re.compile(r"docs/design\.md#([a-z0-9-]+)")
HEADING = re.compile(r"^#+\s+(.*)$", re.M)
ANCHOR = re.compile(r"<a id=\"([^\"]+)\"></a>")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def anchors(page: Path) -> set[str]:
    """GitHub's heading slugs and the explicit ``<a id>`` anchors of a markdown page."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    out = set(ANCHOR.findall(text))
    for title in HEADING.findall(text):
        slug = re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")
        out.add(slug)
    return out


def broken(root: Path) -> list[str]:
    pages = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    out = []
    for page in pages:
        text = FENCE.sub("", page.read_text(encoding="utf-8"))
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):  # http:, https:, mailto: — not checked offline
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                out.append(f"{page.relative_to(root)}: {target}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                out.append(f"{page.relative_to(root)}: {target}: no such anchor")
    design = root / "docs" / "design.md"
    known = anchors(design) if design.exists() else set()
    for source in sorted((root / "scix_core").rglob("*.py")):
        for anchor in CITED.findall(source.read_text(encoding="utf-8")):
            if anchor not in known:
                out.append(f"{source.relative_to(root)}: docs/design.md#{anchor}: no such anchor")
    return out


def main() -> int:
    root = Path(__file__).resolve().parents[2]
    found = broken(root)
    for line in found:
        print(line)
    print(f"links: {len(found)} broken" if found else "links: every link resolves")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
