"""`scix ingest --append`: after any sequence of appends the index answers as a full ingest of the same
records — the lexical lanes (FTS5 and the term matrix) the same ranks and scores, the dense lane the same ids
under exact search, hybrid the same top 10 on a gold set — on random sequences over the fixture corpus and
on real days of the shared arXiv listings; and bad input changes nothing."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scix_core.append import append
from scix_core.config import load_config
from scix_core.data import Dataset, load_dataset
from scix_core.data.dataset import PaperCollector
from scix_core.errors import ConfigError, DataFormatError, FilterError, IndexBusyError, IndexNotFoundError
from scix_core.ingest import ingest
from scix_core.search import Searcher
from scix_core.stores.papers import PaperStore
from scix_core.vectors import close_readers
from scix_core.workspace import Workspace
from tests.corpus import PAPERS, QRELS, QUERIES
from tests.helpers import listing_file, make_request

pytestmark = pytest.mark.model


class OneByOne:
    """The real encoder, one text per call: a paper's vector then never depends on the batch it was encoded
    in (int8 backends quantise activations per batch), so an append's vectors are a full ingest's."""

    def __init__(self, encoder):
        self.inner, self.slug, self.max_length, self.config = (
            encoder,
            encoder.slug,
            encoder.max_length,
            encoder.config,
        )

    def encode(self, texts, progress=False):
        if not len(texts):
            return self.inner.encode([])
        return np.vstack([self.inner.encode([t]) for t in texts])


def _rows(build: Path) -> list[tuple]:
    store = PaperStore(build / "papers.sqlite")
    try:
        return [tuple(r) for r in store.conn.execute("SELECT * FROM papers ORDER BY idx")]
    finally:
        store.close()


def _answers(cfg, index: str, queries: list[str], encoder) -> dict:
    """Every lane's ranking and the hybrid top 10 of each query, on both lexical backends."""
    out = {}
    for backend in ("sqlite", "bm25"):
        searcher = Searcher(index, cfg, backend=backend)
        try:
            for q in queries:
                request = make_request(q, encoder)
                for lane in [*searcher.lexical, searcher.dense]:
                    ranking = lane.search(request, 50)
                    out[backend, lane.name, q] = [(i.paper_id, round(i.score, 4)) for i in ranking.items]
                out[backend, "hybrid", q] = list(searcher.search(q, "hybrid", limit=10).ids)
        finally:
            searcher.close()
    return out


def _same(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for key, ranking in want.items():
        if key[1] == "hybrid":
            assert got[key] == ranking, key
            continue
        assert [p for p, _ in got[key]] == [p for p, _ in ranking], key
        assert [s for _, s in got[key]] == pytest.approx([s for _, s in ranking], abs=2e-4), key


def _revised(paper, day: dt.date):
    return dataclasses.replace(
        paper, abstract=paper.abstract + " Revised: graph networks for galaxies.", listed=day
    )


BATCH = st.lists(st.tuples(st.integers(0, len(PAPERS) - 1), st.booleans()), min_size=1, max_size=6)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    first=st.lists(st.integers(0, len(PAPERS) - 1), min_size=1, max_size=8, unique=True),
    batches=st.lists(BATCH, min_size=1, max_size=3),
)
def test_appends_answer_as_a_full_ingest(home, encoder, first, batches):
    """Random append sequences (new papers, new versions of held ones, repeats of held ones) against a
    full ingest of the records in the same order, a later record of an id replacing the earlier."""
    cfg = load_config()
    single = OneByOne(encoder)
    day0 = dt.date(2025, 1, 1)
    records = [[dataclasses.replace(PAPERS[i], listed=day0) for i in first]]
    for n, batch in enumerate(batches, start=1):
        day = day0 + dt.timedelta(days=n)
        records.append(
            [
                _revised(PAPERS[i], day) if new else dataclasses.replace(PAPERS[i], listed=day)
                for i, new in batch
            ]
        )
    everything = PaperCollector(newer_wins=True)
    for batch in records:
        for paper in batch:
            everything.add(paper)

    def dataset(papers) -> Dataset:
        kept = PaperCollector(newer_wins=True)
        for p in papers:
            kept.add(p)
        return Dataset("days", "arxiv-jsonl", kept.papers)

    tag = f"{abs(hash((tuple(first), repr(batches)))):x}"[:10]
    full, grown = f"full-{tag}", f"grown-{tag}"
    ingest(dataset(everything.papers), full, config=cfg, progress=False, encoder=single)
    ingest(dataset(records[0]), grown, config=cfg, progress=False, encoder=single)
    for batch in records[1:]:
        report = append(dataset(batch), grown, config=cfg, progress=False, encoder=single)
        assert report.added + report.replaced + report.unchanged == report.taken
    ws = Workspace(cfg.home)
    assert _rows(ws.index_dir(grown)) == _rows(ws.index_dir(full))
    queries = [q.text for q in QUERIES]
    _same(_answers(cfg, grown, queries, encoder), _answers(cfg, full, queries, encoder))
    close_readers()
    for name in (full, grown):
        shutil.rmtree(ws.index_root(name))


def _days(data_dir: Path, folder: Path, count: int) -> list[Path]:
    """``count`` listing days of the shared math.NT listing after its first (a 478-paper backfill), one
    ``YYYY-MM-DD.jsonl`` each."""
    from scix_core.bench.update import split_days

    source = folder / "source"
    source.mkdir(parents=True)
    for name in ("math_nt_daily.jsonl.gz", "math_nt_daily.index.tsv.gz"):
        (source / name).symlink_to(data_dir / "arxiv-daily" / name)
    return split_days(source, folder / "days")[1 : 1 + count]


@pytest.mark.realdata
def test_real_days_appended_one_at_a_time_answer_as_a_full_ingest(home, encoder, data_dir, tmp_path):
    cfg = load_config()
    single = OneByOne(encoder)
    days = _days(data_dir, tmp_path, 7)
    (tmp_path / "base").mkdir()
    for day in days[:3]:
        (tmp_path / "base" / day.name).symlink_to(day)
    ingest(
        tmp_path / "days" if False else tmp_path / "base",
        "grown",
        "arxiv-jsonl",
        config=cfg,
        progress=False,
        encoder=single,
    )
    added = 0
    for day in days[3:]:
        report = append(day, "grown", config=cfg, progress=False, encoder=single)
        assert report.status == "appended" and report.rejected == ()
        added += report.added
    (tmp_path / "all").mkdir()
    for day in days:
        (tmp_path / "all" / day.name).symlink_to(day)
    ingest(tmp_path / "all", "full", "arxiv-jsonl", config=cfg, progress=False, encoder=single)
    ws = Workspace(cfg.home)
    rows = _rows(ws.index_dir("grown"))
    assert rows == _rows(ws.index_dir("full"))
    listed = {r[11] for r in rows}
    assert listed == {d.stem for d in days}  # every paper keeps the day it was listed
    # a known-item gold set: each of 12 papers' titles finds that paper
    store = PaperStore(ws.index_dir("full") / "papers.sqlite")
    known = list(store.papers())[:: max(1, len(rows) // 12)][:12]
    store.close()
    queries = [p.title for p in known]
    got, want = _answers(cfg, "grown", queries, encoder), _answers(cfg, "full", queries, encoder)
    _same(got, want)
    found = sum(p.paper_id in want["bm25", "hybrid", p.title][:10] for p in known)
    assert found >= 10  # the gold set is a real one: hybrid finds most titles' papers
    assert added > 0


@pytest.fixture
def small(home, encoder, tmp_path):
    """A four-paper index from the fixture listing day files (``2025-01-01.jsonl``), and a second day."""
    cfg = load_config()
    day1 = listing_file(tmp_path / "2025-01-01.jsonl", PAPERS[:4])
    day2 = listing_file(tmp_path / "2025-01-02.jsonl", PAPERS[4:6])
    ingest(day1, "small", "arxiv-jsonl", config=cfg, progress=False, encoder=encoder)
    return cfg, day1, day2


def _state(cfg, index="small"):
    ws = Workspace(cfg.home)
    return ws.index_dir(index).name, _rows(ws.index_dir(index))


def test_listing_day_from_the_file_name_and_a_day_already_in_changes_nothing(small, encoder):
    cfg, day1, day2 = small
    before = _state(cfg)
    assert {r[11] for r in before[1]} == {"2025-01-01"}
    report = append(day1, "small", config=cfg, progress=False, encoder=encoder)
    assert (report.status, report.unchanged, report.added) == ("unchanged", 4, 0)
    assert _state(cfg) == before
    report = append(day2, "small", config=cfg, progress=False, encoder=encoder)
    assert (report.status, report.added, report.replaced) == ("appended", 2, 0)
    rows = _state(cfg)[1]
    assert [r[11] for r in rows] == ["2025-01-01"] * 4 + ["2025-01-02"] * 2
    manifest = json.loads((Workspace(cfg.home).index_dir("small") / "manifest.json").read_text())
    assert manifest["papers"] == manifest["vectors"] == 6 and manifest["appends"][-1]["added"] == 2


def test_a_new_version_replaces_in_place_and_keeps_its_first_day(small, encoder, tmp_path):
    cfg, _, _ = small
    later = tmp_path / "2025-02-01.jsonl"
    later.write_text(
        json.dumps(
            {"id": PAPERS[0].paper_id, "title": "Graph networks, revised", "summary": "A new version."}
        )
        + "\n"
    )
    report = append(later, "small", config=cfg, progress=False, encoder=encoder)
    assert (report.added, report.replaced) == (0, 1)
    row = _state(cfg)[1][0]
    assert (row[1], row[2], row[11]) == (PAPERS[0].paper_id, "Graph networks, revised", "2025-01-01")
    searcher = Searcher("small", cfg)
    try:
        assert searcher.search("revised", "keyword").ids[0] == PAPERS[0].paper_id
        assert searcher.search("molecule solubility toxicity", "keyword").ids[:1] != (PAPERS[0].paper_id,)
    finally:
        searcher.close()


@pytest.mark.parametrize(
    "content, error",
    [
        ('{"id": "x1", "title": "Fine"}\n{not json\n', "counted"),
        ('{"title": "no id here"}\n', "counted"),
        ("", DataFormatError),
        ("id,title\nx1,a csv row\n", "counted"),
    ],
    ids=["malformed-line", "record-without-id", "empty-file", "wrong-format"],
)
def test_hostile_appends_are_counted_or_typed_and_change_nothing_else(
    small, encoder, tmp_path, content, error
):
    cfg, _, _ = small
    before = _state(cfg)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content)
    if error == "counted":
        report = append(bad, "small", config=cfg, progress=False, encoder=encoder)
        assert report.rejected and all(r.path == str(bad) and r.line >= 1 for r in report.rejected)
        rows = _state(cfg)[1]
        assert rows[:4] == before[1]  # held papers untouched; a good line beside a bad one is taken
        assert len(rows) == 4 + report.added
        return
    with pytest.raises(error):
        append(bad, "small", config=cfg, progress=False, encoder=encoder)
    assert _state(cfg) == before


def test_an_append_with_gold_data_or_to_no_index_is_refused(small, encoder):
    cfg, day1, _ = small
    with pytest.raises(IndexNotFoundError):
        append(day1, "absent", config=cfg, progress=False, encoder=encoder)
    with pytest.raises(ConfigError, match="papers only"):
        append(
            Dataset("q", "python", PAPERS[:2], QUERIES, {"train": QRELS["train"]}),
            "small",
            config=cfg,
            progress=False,
            encoder=encoder,
        )


def test_one_writer_at_a_time(small, encoder):
    cfg, _, day2 = small
    before = _state(cfg)
    with Workspace(cfg.home).writing("small"):
        with pytest.raises(IndexBusyError):
            append(day2, "small", config=cfg, progress=False, encoder=encoder)
    assert _state(cfg) == before
    assert append(day2, "small", config=cfg, progress=False, encoder=encoder).added == 2


def test_loaded_listing_keeps_days_from_the_index_file(data_dir):
    dataset = load_dataset(data_dir / "arxiv-daily" / "math_nt_daily.jsonl.gz", "arxiv-jsonl")
    days = sorted({p.listed for p in dataset.papers})
    assert None not in days and days[0] == dt.date(2025, 7, 8) and len(days) > 250


@pytest.mark.parametrize("mode", ["keyword", "semantic", "hybrid"])
def test_since_keeps_the_papers_listed_from_that_day_in_every_lane(small, encoder, mode):
    cfg, _, day2 = small
    append(day2, "small", config=cfg, progress=False, encoder=encoder)
    searcher = Searcher("small", cfg)
    try:
        everything = searcher.search("neural networks galaxies vitamin primes", mode, limit=20).ids
        recent = searcher.search("neural networks galaxies vitamin primes", mode, {"since": "2025-01-02"}, 20)
    finally:
        searcher.close()
    new = {p.paper_id for p in PAPERS[4:6]}
    assert set(recent.ids) <= new and recent.ids
    assert set(everything) - new  # the filter is what removed the older papers
    with pytest.raises(FilterError, match="YYYY-MM-DD"):
        Searcher("small", cfg).search("x", mode, {"since": "yesterday"})


def test_a_paper_is_dated_by_its_listing_day_unless_it_is_older():
    from scix_core.recommend.catalog import paper_day

    d = dt.date
    assert paper_day(d(2026, 6, 1), d(2026, 6, 18)) == d(2026, 6, 18)  # an id's month, listed that month
    assert paper_day(d(2018, 12, 1), d(2026, 6, 18)) == d(2018, 12, 1)  # a cross-list of an old paper
    assert paper_day(None, d(2026, 6, 18)) == d(2026, 6, 18)
    assert paper_day(d(2019, 1, 1), None) == d(2019, 1, 1)


def test_a_server_answers_from_the_appended_corpus_without_a_restart(small, encoder):
    from fastapi.testclient import TestClient

    from scix_core.serve.app import create_app

    cfg, _, day2 = small
    new = PAPERS[5]
    with TestClient(create_app("small", cfg)) as client:
        before = client.get("/healthz").json()
        assert before["papers"] == 4 and before["builds_followed"] == 0
        assert new.paper_id not in _hits(client, new.title)
        append(day2, "small", config=cfg, progress=False, encoder=encoder)
        for _ in range(150):  # the worker looks every FOLLOW_S (2 s)
            health = client.get("/healthz").json()
            if health["builds_followed"]:
                break
            assert _hits(client, PAPERS[0].title)  # the old build answers meanwhile
            time.sleep(0.1)
        assert health["papers"] == 6 and health["build"] != before["build"] and health["status"] == "ok"
        assert _hits(client, new.title)[0] == new.paper_id
        user = client.post("/api/users", json={"user": "reader"}).json()["user"]
        saved = client.post("/api/interactions", json={"user": user, "paper": new.paper_id, "kind": "save"})
        assert saved.status_code == 201  # a paper of the appended day is known to the recommender too
        assert client.get("/api/recommendations", params={"user": user}).status_code == 200


def _hits(client, q: str) -> list[str]:
    r = client.get("/search", params={"q": q, "limit": 5})
    assert r.status_code == 200, r.text
    return [h["paper_id"] for h in r.json()["hits"]]


@pytest.mark.postgres
def test_the_postgres_mirror_follows_an_append_in_place(small, encoder, postgresql, tmp_path):
    """The mirror of the previous build is brought up to the appended one (new papers, a new version, new
    terms, changed document frequencies) and ranks as the mirror of a full ingest of the same records."""
    from scix_core.stores.postgres import sync_append, sync_index

    cfg, day1, day2 = small
    dsn = postgresql.info.dsn
    ws = Workspace(cfg.home)
    sync_index("small", ws.index_dir("small"), dsn)
    later = tmp_path / "2025-01-03.jsonl"
    later.write_text(
        json.dumps(
            {
                "id": PAPERS[1].paper_id,
                "title": "Convolutional zyzzyva classifiers",
                "summary": "Deep networks, revised.",
            }
        )
        + "\n"
        + day2.read_text()
    )
    append(later, "small", config=cfg, progress=False, encoder=encoder)
    synced = sync_append("small", ws.index_dir("small"), dsn)
    assert (synced.status, synced.papers) == ("appended", 3)  # one replaced, two added
    same = PaperCollector(newer_wins=True)
    for path in (day1, later):
        for paper in load_dataset(path, "arxiv-jsonl").papers:
            same.add(paper)
    ingest(Dataset("days", "arxiv-jsonl", same.papers), "whole", config=cfg, progress=False, encoder=encoder)
    sync_index("whole", ws.index_dir("whole"), dsn)
    pg = cfg.replace(**{"postgres.dsn": dsn, "search.lexical_backend": "postgres"})
    for q in ("zyzzyva", "neural networks", "dark matter galaxies", "revised deep networks"):
        got, want = (
            Searcher(name, pg).search(q, "keyword", limit=20).to_dict()["hits"] for name in ("small", "whole")
        )
        assert [(h["paper_id"], round(h["score"], 5)) for h in got] == [
            (h["paper_id"], round(h["score"], 5)) for h in want
        ], q
    assert sync_append("small", ws.index_dir("small"), dsn).status == "unchanged"


def test_passages_and_sparse_vectors_follow_an_append(home, encoder, tmp_path):
    """An index built with ``--passages --sparse``: a replaced paper's old passages go, the new papers'
    come, and the dense lane (MaxP over passages) ranks as on a full ingest; the sparse lane finds them."""
    cfg = load_config()
    single = OneByOne(encoder)
    day = dt.date(2025, 1, 1)

    def long(paper):  # passages are three-sentence windows of abstracts longer than one window
        more = " ".join(f"{paper.title} is studied in part {i}." for i in range(4))
        return dataclasses.replace(paper, abstract=f"{paper.abstract} {more}", listed=day)

    first = [long(p) for p in PAPERS[:5]]
    later = [_revised(first[1], day + dt.timedelta(days=1)), *(long(p) for p in PAPERS[5:8])]
    opts = {"config": cfg, "progress": False, "encoder": single, "passages": True, "sparse": True}
    ingest(Dataset("d", "arxiv-jsonl", tuple(first)), "grown", **opts)
    report = append(
        Dataset("d", "arxiv-jsonl", tuple(later)), "grown", config=cfg, progress=False, encoder=single
    )
    assert (report.added, report.replaced) == (3, 1)
    same = PaperCollector(newer_wins=True)
    for paper in [*first, *later]:
        same.add(paper)
    ingest(Dataset("d", "arxiv-jsonl", same.papers), "full", **opts)
    queries = [q.text for q in QUERIES]
    grown, full = _answers(cfg, "grown", queries, encoder), _answers(cfg, "full", queries, encoder)
    _same(
        {k: v for k, v in grown.items() if k[1] == "dense"},
        {k: v for k, v in full.items() if k[1] == "dense"},
    )
    searcher = Searcher("grown", cfg)
    try:
        hits = searcher.search(PAPERS[6].title, "keyword", limit=3, lanes=["sparse"]).to_dict()["hits"]
        assert any(h["paper_id"] == PAPERS[6].paper_id and "sparse" in h["lanes"] for h in hits)
    finally:
        searcher.close()
    manifest = json.loads((Workspace(cfg.home).index_dir("grown") / "manifest.json").read_text())
    assert manifest["passage_next"] > manifest["passages"] >= 5
