"""The thinned CiteULike folder: seeded saves kept, titles as bags, read back by the loader."""

import pytest

from scix_core.data.formats import load_dataset
from scix_core.data.thin import thin
from scix_core.errors import DataPathError
from tests.conftest import FIXTURES


def test_keeping_every_save_keeps_the_libraries_and_turns_titles_into_bags(tmp_path):
    counts = thin(FIXTURES / "citeulike", tmp_path / "t", keep=1.0, min_saves=1)
    assert counts == {"users": 2, "saves": 5, "saves_per_user": 2.5, "words": 0}
    assert (tmp_path / "t" / "users.dat").read_text() == "2 0 2\n3 0 1 2"
    assert (
        not (tmp_path / "t" / "citeutitles.txt").exists() and not (tmp_path / "t" / "citations.dat").exists()
    )
    ds = load_dataset(tmp_path / "t")
    # three titles share no word, so no word is in two of them: no bag has words, every item its tags
    assert [p.title for p in ds.papers] == ["", "", ""]
    assert len(ds.interactions) == 5 and ds.tags == load_dataset(FIXTURES / "citeulike").tags


def test_a_kept_share_is_seeded_and_drops_users_left_below_the_minimum(tmp_path):
    thin(FIXTURES / "citeulike", tmp_path / "a", keep=0.5, min_saves=2, seed=3)
    thin(FIXTURES / "citeulike", tmp_path / "b", keep=0.5, min_saves=2, seed=3)
    kept = (tmp_path / "a" / "users.dat").read_text()
    assert kept == (tmp_path / "b" / "users.dat").read_text()
    originals = [{"0", "2"}, {"0", "1", "2"}]
    for line in filter(None, kept.split("\n")):
        n, *items = line.split()
        assert int(n) == len(items) >= 2 and any(set(items) <= o for o in originals)


def test_words_in_two_titles_become_the_bags(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "citeutitles.txt").write_text("Small world networks\nMetabolic networks of the cell\nA cell\n")
    (src / "users.dat").write_text("3 0 1 2")
    thin(src, tmp_path / "t", keep=1.0, min_saves=1)
    assert (tmp_path / "t" / "vocabulary.dat").read_text().split() == ["cell", "networks"]  # a tie: by word
    assert [p.abstract for p in load_dataset(tmp_path / "t").papers] == ["networks", "cell networks", "cell"]


def test_a_folder_without_titles_or_a_bad_share_is_refused(tmp_path):
    with pytest.raises(DataPathError, match="users.dat"):
        thin(FIXTURES / "citeulike_mult", tmp_path / "t", keep=0.5)
    with pytest.raises(ValueError, match="keep"):
        thin(FIXTURES / "citeulike", tmp_path / "t", keep=0.0)
