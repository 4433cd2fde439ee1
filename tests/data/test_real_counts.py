"""Loader counts on the real corpora (../shared/data), as verified in their SOURCE.md."""

import pytest

from scix_core.data import load_dataset

pytestmark = pytest.mark.realdata


def test_scifact(data_dir):
    ds = load_dataset(data_dir / "scifact")
    assert ds.format == "scifact-csv"
    assert len(ds.papers) == 5183 and not ds.rejected
    train = ds.qrels["train"]
    assert len(train) == 809 and sum(map(len, train.values())) == 919
    assert len(ds.queries) == 1109


def test_cranfield(data_dir):
    ds = load_dataset(data_dir / "cranfield")
    assert len(ds.papers) == 1400 and len(ds.queries) == 225
    qrels = ds.qrels["test"]
    assert sum(map(len, qrels.values())) == 1837 and len(qrels) == 225
    grades = [g for docs in qrels.values() for g in docs.values()]
    assert grades.count(-1) == 225 and max(grades) == 4
    assert sum(1 for p in ds.papers if not p.abstract) == 2  # docs 471 and 995


def test_cacm(data_dir):
    ds = load_dataset(data_dir / "cacm")
    assert len(ds.papers) == 3204 and len(ds.queries) == 64
    assert sum(1 for p in ds.papers if p.abstract) == 1587
    qrels = ds.qrels["test"]
    assert len(qrels) == 52 and sum(map(len, qrels.values())) == 796
    direct = [c for c in ds.citations if c.kind == "direct"]
    assert len(direct) == 5440
    assert {(c.target, c.source) for c in direct} == {(c.source, c.target) for c in direct}  # symmetric


def test_citeulike(data_dir):
    ds = load_dataset(data_dir / "citeulike-a")
    assert len(ds.users) == 5551 and len(ds.papers) == 16980 and len(ds.interactions) == 204986
    assert len(ds.citations) == 44757
    assert ds.papers[0].title == "The metabolic world of Escherichia coli is not small"


@pytest.mark.parametrize(
    "name, unique", [("cs_ai_daily", 74728), ("astro_ph_daily", 11434), ("math_nt_daily", 5000)]
)
def test_arxiv_listings(data_dir, name, unique):
    ds = load_dataset(data_dir / "arxiv-daily" / f"{name}.jsonl.gz")
    assert len(ds.papers) == unique and not ds.rejected
    assert all(p.published for p in ds.papers)
    assert not any(c[0].isupper() or c[0].isdigit() for p in ds.papers for c in p.categories)


def test_kaggle_sample(data_dir):
    ds = load_dataset(data_dir / "arxiv-kaggle-sample")
    ids = [p.paper_id for p in ds.papers]
    assert len(ids) == 2000 and ids[0] == "0704.0001" and ids[-1] == "0704.2000"
    assert ids == [f"0704.{i:04d}" for i in range(1, 2001)]
