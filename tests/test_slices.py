"""The real corpora's slices the suite runs on (tests/slices.py): what they keep is the real data, renumbered
consistently — a title, a tag list, a library or a citation link attached to the wrong paper would leave every
recommender test passing on nonsense."""

from __future__ import annotations

from collections import Counter

import pytest

from scix_core.data.citeulike import read_adjacency
from scix_core.data.textio import read_lines
from tests.slices import CITEULIKE_MIN_SAVES, CITEULIKE_PAPERS, KEPT, citeulike_slice, library_counts

pytestmark = [pytest.mark.realdata]


def test_the_citeulike_slice_is_the_most_saved_papers_renumbered_with_what_belongs_to_them(
    data_dir, tmp_path
):
    source = data_dir / "citeulike-a"
    folder = citeulike_slice(data_dir, tmp_path / "c")
    kept = [int(line) for _, line in read_lines(folder / KEPT)]
    assert len(kept) == len(set(kept)) == CITEULIKE_PAPERS and kept == sorted(kept)
    libraries = read_adjacency(source / "users.dat")
    saves = Counter(int(i) for library in libraries for i in library)
    dropped = set(saves) - set(kept)
    assert min(saves[i] for i in kept) >= max(saves[i] for i in dropped)  # the most saved
    titles = [line for _, line in read_lines(source / "citeutitles.txt")]
    assert [line for _, line in read_lines(folder / "citeutitles.txt")] == [titles[i] for i in kept]
    tags = read_adjacency(source / "item-tag.dat")
    assert read_adjacency(folder / "item-tag.dat") == [tags[i] if i < len(tags) else [] for i in kept]
    # each library: the user's saves of kept papers, in order, through the same renumbering
    new = {old: i for i, old in enumerate(kept)}
    cut = [[new[int(i)] for i in library if int(i) in new] for library in libraries]
    expected = [library for library in cut if len(library) >= CITEULIKE_MIN_SAVES]
    assert [[int(i) for i in row] for row in read_adjacency(folder / "users.dat")] == expected
    assert library_counts(folder) == (len(expected), sum(map(len, expected)))
    links = read_adjacency(source / "citations.dat")
    sliced = read_adjacency(folder / "citations.dat")
    assert len(sliced) == CITEULIKE_PAPERS
    for i, row in enumerate(sliced):
        own = links[kept[i]] if kept[i] < len(links) else []
        assert [kept[int(j)] for j in row] == [int(j) for j in own if int(j) in new]


def test_the_citeulike_slice_of_every_paper_and_user_is_the_whole_set(data_dir, tmp_path):
    from scix_core.data import load_dataset

    whole = load_dataset(data_dir / "citeulike-a")
    cut = load_dataset(citeulike_slice(data_dir, tmp_path / "c", papers=len(whole.papers), min_saves=1))
    assert cut.papers == whole.papers and cut.citations == whole.citations and cut.tags == whole.tags
    assert cut.interactions == whole.interactions
