"""A sparser, text-poorer CiteULike folder made from one with titles — the recommender's robustness check.

    python -m scix_core.data.thin SRC OUT [--keep 0.45] [--min-saves 3] [--seed 0] [--vocabulary 8000]

The recommender's defaults were chosen on CiteULike-a (titles, 37 saves a user, 12 a paper). Another
CiteULike-style set may be sparser and carry its text only as a bag of words (the release variant's
``mult.dat``), and what the defaults learned may not carry over. This writes such a set from ``SRC``: each
user keeps a seeded ``--keep`` share of their saves in their order (users left with fewer than
``--min-saves`` are dropped; every paper stays in the catalogue), the titles become LDA-C bags
(:func:`~scix_core.data.citeulike.make_bags`: no titles file is written), the tag files are copied and the
citations left out. Ingest ``OUT`` and run the same ``scix eval-recs`` commands on it (docs/history.md).
"""

from __future__ import annotations

import argparse
import random
import shutil
from pathlib import Path

from scix_core.data.citeulike import TITLE_FILES, make_bags, read_adjacency, write_adjacency, write_lda_c
from scix_core.data.textio import read_lines
from scix_core.errors import DataPathError

TAG_FILES = ("item-tag.dat", "tag-item.dat", "tags.dat")


def thin(
    source: Path, out: Path, keep: float, min_saves: int = 3, seed: int = 0, vocabulary: int = 8000
) -> dict:
    """Write the thinned folder; returns its counts (users, saves, saves a user, words)."""
    if not 0 < keep <= 1:
        raise ValueError(f"keep must be in (0, 1], not {keep}")
    titles_file = next((source / n for n in TITLE_FILES if (source / n).exists()), None)
    if titles_file is None or not (source / "users.dat").exists():
        raise DataPathError(
            f"{source} is not a CiteULike folder with titles (users.dat and {TITLE_FILES[0]})"
        )
    out.mkdir(parents=True, exist_ok=True)
    words, bags = make_bags([line.strip() for _, line in read_lines(titles_file)], vocabulary)
    write_lda_c(out, words, bags)
    rng = random.Random(seed)
    libraries = []
    for library in read_adjacency(source / "users.dat"):
        kept = [item for item in library if rng.random() < keep]
        if len(kept) >= min_saves:
            libraries.append(kept)
    write_adjacency(out / "users.dat", libraries)
    for name in TAG_FILES:
        if (source / name).exists():
            shutil.copyfile(source / name, out / name)
    saves = sum(map(len, libraries))
    return {
        "users": len(libraries),
        "saves": saves,
        "saves_per_user": round(saves / max(len(libraries), 1), 2),
        "words": len(words),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--keep", type=float, default=0.45, help="share of each user's saves kept")
    parser.add_argument("--min-saves", type=int, default=3, help="users left with fewer are dropped")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--vocabulary", type=int, default=8000, help="words kept, in most titles first")
    args = parser.parse_args(argv)
    counts = thin(args.source, args.out, args.keep, args.min_saves, args.seed, args.vocabulary)
    print(", ".join(f"{k} {v}" for k, v in counts.items()))
    return counts


if __name__ == "__main__":
    main()
