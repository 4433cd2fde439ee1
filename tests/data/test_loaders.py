"""Every loader on a small hand-checkable fixture, including its quirks."""

import datetime as dt
import shutil

import pytest

from scix_core.data import LOADERS, detect_format, load_dataset
from scix_core.data.scifact_csv import parse_sentences
from scix_core.errors import DataFormatError, DataPathError, UnknownNameError
from tests.conftest import FIXTURES


def test_beir_folder_crlf_qrels_bad_line_and_duplicate():
    ds = load_dataset(FIXTURES / "beir")
    assert ds.format == "beir"
    assert [p.paper_id for p in ds.papers] == ["d1", "d2", "d3"]
    assert ds.papers[0].title == "Dark matter halos"  # first occurrence wins
    assert ds.duplicates == 1
    assert len(ds.rejected) == 1 and ds.rejected[0].line == 3 and "corpus.jsonl" in ds.rejected[0].path
    assert ds.qrels == {"test": {"q1": {"d1": 2, "d3": 1}, "q2": {"d2": 1}}}
    assert ds.queries[0].fields == {"bucket": "short"}


def test_smart_positional_qrels_grades_links_and_empty_abstract():
    ds = load_dataset(FIXTURES / "smart")
    assert ds.format == "smart"
    assert [p.paper_id for p in ds.papers] == ["1", "2", "3"]
    first = ds.papers[0]
    assert first.title == "flutter of panels" and first.authors == ("smith,j.",)
    assert first.published == dt.date(1961, 3, 1)
    assert ds.papers[1].abstract == ""  # empty .W kept, not rejected
    assert [q.query_id for q in ds.queries] == ["1", "4", "9"]
    # qrels name queries by position: 2 -> the second query, .I 004; codes 1..4 -> gain 5-code; -1 kept
    # negative
    assert ds.qrels["test"] == {"1": {"1": 4, "2": -1}, "4": {"3": 3, "1": 1}}
    direct = {(c.source, c.target) for c in ds.citations if c.kind == "direct"}
    assert direct == {("1", "2"), ("2", "1")}  # self-link 1->1 dropped
    assert {c.kind for c in ds.citations} == {"direct", "coupling"}
    assert first.citation_count == 1


def test_scifact_csv_numpy_printout():
    assert parse_sentences("['a b.'\n 'c \\'d\\'.' \"e's\"]") == ["a b.", "c 'd'.", "e's"]
    with pytest.raises(ValueError):
        parse_sentences("['ok' garbage 'x']")
    ds = load_dataset(FIXTURES / "scifact_csv", "scifact-csv")
    assert [p.paper_id for p in ds.papers] == ["11", "13"]
    assert (
        ds.papers[0].abstract == "First sentence. Second, with a comma. It's quoted. Escaped 'single' quotes."
    )
    assert len(ds.rejected) == 1 and "abstract" in ds.rejected[0].reason
    assert ds.qrels == {"train": {"5": {"11": 1, "13": 1}, "6": {"13": 1}}}


def test_citeulike_without_trailing_newline():
    ds = load_dataset(FIXTURES / "citeulike")
    assert ds.format == "citeulike"
    assert len(ds.papers) == 3 and ds.papers[2].title == "Metabolic networks"
    assert [(i.user_id, i.paper_id, i.position) for i in ds.interactions] == [
        ("0", "0", 0),
        ("0", "2", 1),
        ("1", "0", 0),
        ("1", "1", 1),
        ("1", "2", 2),
    ]
    assert {(c.source, c.target) for c in ds.citations} == {("0", "1"), ("1", "2")}
    assert ds.papers[1].citation_count == 2
    assert ds.tags == {"0": ("networks", "metabolism"), "2": ("metabolism",)}


def test_citeulike_count_prefix_mismatch_names_file_and_line(tmp_path):
    shutil.copytree(FIXTURES / "citeulike", tmp_path / "c")
    (tmp_path / "c" / "users.dat").write_text("2 0 2\n5 0 1")
    with pytest.raises(DataFormatError) as err:
        load_dataset(tmp_path / "c")
    assert err.value.line == 2 and err.value.path.endswith("users.dat")


def test_arxiv_listing_filters_codes_dedupes_and_rejects_bad_lines():
    """A repeated id is a newer version: it replaces the first record in its place."""
    ds = load_dataset(FIXTURES / "arxiv")
    assert ds.format == "arxiv-jsonl"
    assert [p.paper_id for p in ds.papers] == ["2103.01234", "1812.00001"]
    assert (ds.papers[0].title, ds.papers[0].abstract, ds.papers[0].categories) == ("dup", "dup", ("cs.AI",))
    assert ds.papers[0].published == dt.date(2021, 3, 1)
    assert ds.papers[1].categories == ("astro-ph.GA",)
    assert ds.duplicates == 1 and len(ds.rejected) == 1 and ds.rejected[0].line == 4


def test_truncated_gzip_is_a_typed_error_naming_the_file(tmp_path):
    data = (FIXTURES / "arxiv" / "listing.jsonl.gz").read_bytes()
    (tmp_path / "cut.jsonl.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(DataFormatError) as err:
        load_dataset(tmp_path / "cut.jsonl.gz")
    assert "cut.jsonl.gz" in str(err.value)


def test_kaggle_csv_repairs_ids_and_dates():
    ds = load_dataset(FIXTURES / "arxiv_kaggle.csv")
    assert ds.format == "arxiv-kaggle"
    assert [p.paper_id for p in ds.papers] == ["0704.0010", "0704.2000"]
    assert ds.papers[0].published == dt.date(2007, 3, 31)  # v1 creation date
    assert ds.papers[1].published == dt.date(2007, 4, 1)  # no versions: from the id
    assert ds.papers[0].authors == ("A. B", "C. D")
    assert ds.papers[0].categories == ("hep-ph", "math.NT")
    assert ds.papers[0].abstract == "An abstract wrapped."


def test_bad_paths_and_formats(tmp_path):
    with pytest.raises(DataPathError, match="no such file"):
        load_dataset(tmp_path / "missing")
    with pytest.raises(UnknownNameError) as err:
        load_dataset(FIXTURES / "beir", "trec-web")
    assert "beir" in str(err.value) and "smart" in str(err.value)
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "notes.txt").write_text("hello")
    with pytest.raises(DataPathError, match="--format"):
        detect_format(tmp_path / "x")
    assert set(LOADERS) == {"beir", "scifact-csv", "smart", "arxiv-jsonl", "arxiv-kaggle", "citeulike"}


def test_citeulike_release_variant_with_bag_of_words_and_tag_item():
    ds = load_dataset(FIXTURES / "citeulike_mult")
    assert ds.format == "citeulike" and len(ds.papers) == 3
    # mult.dat line 0: galaxy x1, halo x3, dark x2 -> each word once, most frequent first
    assert [p.abstract for p in ds.papers] == ["halo dark galaxy", "protein folding", "network matter"]
    assert [p.title for p in ds.papers] == ["", "", ""] and ds.papers[0].text == "halo dark galaxy"
    assert dict(ds.tags) == {"0": ("astro",), "1": ("bio",), "2": ("astro",)}  # tag-item.dat turned around
    assert len(ds.interactions) == 5


def test_citeulike_bad_bag_of_words_names_file_and_line(tmp_path):
    shutil.copytree(FIXTURES / "citeulike_mult", tmp_path / "c")
    (tmp_path / "c" / "mult.dat").write_text("3 0:1 1:3 2:2\n2 4:5 99:1\n")
    with pytest.raises(DataFormatError, match=r"mult.dat:2: term '99:1'"):
        load_dataset(tmp_path / "c")
    (tmp_path / "c" / "vocabulary.dat").unlink()
    with pytest.raises(DataPathError, match="vocabulary.dat"):
        load_dataset(tmp_path / "c")


def test_citeulike_without_text_files_reads_tag_names_as_text(tmp_path):
    shutil.copytree(FIXTURES / "citeulike", tmp_path / "c")
    (tmp_path / "c" / "citeutitles.txt").unlink()
    (tmp_path / "c" / "tags.dat").write_text("small-world\ngene_expression")
    ds = load_dataset(tmp_path / "c")
    assert [(p.title, p.abstract) for p in ds.papers] == [
        ("", "small world, gene expression"),
        ("", ""),
        ("", "gene expression"),
    ]  # item 1 has no tag: no text
    assert ds.tags["0"] == ("small-world", "gene_expression")  # the tags themselves unchanged
    with_titles = load_dataset(FIXTURES / "citeulike")
    assert [p.abstract for p in with_titles.papers] == ["", "", ""]  # an item with text never gets its tags


RAW = (
    "doc.id,title,citeulike.id,raw.title,raw.abstract\n"
    '3,metabolic networks,42,"{M}etabolic networks, revisited","Line one,\nline {two}."\n'
    '1,small worlds,7,Small worlds,"An abstract\xa0with a non-breaking space."\n'
)


def test_citeulike_raw_data_csv_gives_titles_and_abstracts(tmp_path):
    shutil.copytree(FIXTURES / "citeulike", tmp_path / "c")
    (tmp_path / "c" / "raw-data.csv").write_text(RAW, encoding="utf-8")
    ds = load_dataset(tmp_path / "c")
    assert [(p.title, p.abstract) for p in ds.papers] == [
        ("Small worlds", "An abstract with a non-breaking space."),  # doc.id 1 -> item 0
        ("Community structure", ""),  # no row: the titles file's title
        ("Metabolic networks, revisited", "Line one, line two."),
    ]  # braces dropped, the line break is a space
    assert str(tmp_path / "c" / "raw-data.csv") in ds.sources


def test_citeulike_raw_data_csv_errors_and_stray_bytes(tmp_path):
    shutil.copytree(FIXTURES / "citeulike", tmp_path / "c")
    raw = tmp_path / "c" / "raw-data.csv"
    raw.write_bytes(RAW.encode().replace(b"Line one", b"Line \xe9one"))  # latin-1 e-acute: not UTF-8
    assert load_dataset(tmp_path / "c").papers[2].abstract == "Line \ufffdone, line two."
    raw.write_text(RAW.replace("\n1,small", "\nzero,small"))
    with pytest.raises(DataFormatError, match=r"raw-data.csv:4: doc.id 'zero'"):
        load_dataset(tmp_path / "c")
    raw.write_text("id,name\n1,x\n")
    with pytest.raises(DataFormatError, match="no title or abstract column"):
        load_dataset(tmp_path / "c")


def test_csv_that_is_not_utf8_is_a_typed_error_naming_the_line(tmp_path):
    from scix_core.data.textio import read_csv_rows

    path = tmp_path / "x.csv"
    path.write_bytes(b"a,b\n1,ok\n2,caf\xe9\n")
    with pytest.raises(DataFormatError) as err:
        list(read_csv_rows(path))
    assert "not UTF-8" in str(err.value) and err.value.path.endswith("x.csv")
