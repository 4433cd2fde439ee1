"""Passage vectors (``scix ingest --passages``): the dense lane scores a paper by its best passage too
(MaxP)."""

import datetime as dt

import pytest

from scix_core.config import load_config
from scix_core.data import Dataset
from scix_core.embeddings.passages import STRIDE, WINDOW, corpus_passages, passages, sentences
from scix_core.errors import ConfigError
from scix_core.search import Searcher
from scix_core.types import Paper, Query

FILLER = (
    "The utility serves four districts of the city. Its annual budget rose by three percent. Staffing levels "
    "were unchanged from the previous year. New pipes were laid along the northern ring road. Customer "
    "complaints about water pressure fell slightly."
)
BURIED = Paper(
    "w1",
    "Annual report of the municipal water utility",
    FILLER + " Separately, zebrafish kept in the utility's test tanks regenerated heart tissue within weeks "
    "after cryoinjury. The tanks will be moved in spring.",
    authors=("A. Clerk",),
    categories=("misc",),
    published=dt.date(2020, 1, 1),
)
OTHERS = (
    Paper(
        "f1",
        "Freshwater fish populations in northern lakes",
        "We count fish in lakes. Populations declined. Water temperature rose. Fishing quotas were cut.",
        categories=("bio",),
        published=dt.date(2019, 1, 1),
    ),
    Paper(
        "h1",
        "Heart failure outcomes in older adults",
        "A cohort of older adults with heart failure was followed for five years. Mortality was high.",
        categories=("med",),
        published=dt.date(2018, 1, 1),
    ),
    Paper(
        "b1", "Budget planning for city services", FILLER, categories=("misc",), published=dt.date(2021, 1, 1)
    ),
)
FILLER_PAPER = OTHERS[2]
CORPUS = Dataset(
    "passages",
    "python",
    (BURIED, *OTHERS),
    (Query("q1", "zebrafish heart regeneration after injury"),),
    {"train": {"q1": {"w1": 2}}},
)


def test_passages_are_overlapping_sentence_windows_after_the_title():
    paper = Paper("x", "T", "One. Two e.g. twice. Three! Four? Five. Six.")
    assert sentences(paper.abstract) == ["One.", "Two e.g. twice.", "Three!", "Four?", "Five.", "Six."]
    assert (WINDOW, STRIDE) == (3, 2)
    assert passages(paper) == ["T. One. Two e.g. twice. Three!", "T. Three! Four? Five.", "T. Five. Six."]
    assert passages(Paper("y", "T", "One. Two. Three.")) == []  # the paper's own vector reads all of it
    # lower-case collections (Cranfield) end sentences too; initials and abbreviations do not, decimals never
    # split
    assert sentences(
        "the flow is laminar. the layer thickens by 3.5 mm. heat transfer (cf. ref. 2) rises."
    ) == ["the flow is laminar.", "the layer thickens by 3.5 mm.", "heat transfer (cf. ref. 2) rises."]
    assert sentences("As J. Smith et al. showed, it holds. It fails i.e. sometimes.") == [
        "As J. Smith et al. showed, it holds.",
        "It fails i.e. sometimes.",
    ]
    assert passages(Paper("z", "", "One. Two. Three. Four.")) == ["One. Two. Three.", "Three. Four."]
    owners, texts = corpus_passages([Paper("a", "A", "x"), paper, Paper("b", "B", "1. 2. 3. 4. 5.")])
    assert owners == [1, 1, 1, 2, 2] and texts[3] == "B. 1. 2. 3."


@pytest.fixture(scope="module")
def passage_home(tmp_path_factory, encoder):
    from scix_core.ingest import ingest

    cfg = load_config().replace(home=tmp_path_factory.mktemp("passages-home"))
    report = ingest(CORPUS, "with", config=cfg, progress=False, encoder=encoder, passages=True)
    assert report.manifest["passages"] == len(passages(BURIED)) + len(passages(OTHERS[0])) + len(
        passages(FILLER_PAPER)
    )
    assert report.manifest["passage_window"] == WINDOW and "passages" in [s.stage for s in report.stages]
    plain = ingest(CORPUS, "without", config=cfg, progress=False, encoder=encoder)
    assert plain.manifest["build_key"] != report.manifest["build_key"] and "passages" not in plain.manifest
    return cfg


def _dense(searcher, **kw):
    result = searcher.search(CORPUS.queries[0].text, "semantic", limit=4, **kw)
    return result, {h.paper_id: h.lanes["dense"].score for h in result.hits}


def test_a_buried_sentence_lifts_its_paper_through_its_passage(passage_home):
    with_p, without = Searcher("with", passage_home), Searcher("without", passage_home)
    try:
        result, scores = _dense(with_p)
        plain, plain_scores = _dense(without)
        assert result.metadata["dense_passages"] and not plain.metadata["dense_passages"]
        assert (
            result.ids[0] == "w1"
        )  # its zebrafish passage, not its utility-report whole, is what the query meets
        assert scores["w1"] > plain_scores["w1"] + 0.05
        assert scores["h1"] == pytest.approx(
            plain_scores["h1"], abs=1e-6
        )  # two sentences: no passage, same score
        # filters are payload conditions the passages carry too: the buried paper's year excludes it
        assert (
            "w1"
            not in with_p.search(CORPUS.queries[0].text, "semantic", limit=4, filters={"year_min": 2021}).ids
        )
    finally:
        with_p.close()
        without.close()


def test_passages_can_be_switched_off_by_config_and_the_hybrid_uses_them(passage_home):
    off = Searcher("with", passage_home.replace(**{"search.passages": False}))
    on, without = Searcher("with", passage_home), Searcher("without", passage_home)
    try:
        result, scores = _dense(off)
        _, plain = _dense(without)
        assert not result.metadata["dense_passages"] and scores == pytest.approx(plain, abs=1e-6)
        hybrid = on.search(CORPUS.queries[0].text, "hybrid", limit=4)
        assert hybrid.metadata["dense_passages"] and hybrid.ids[0] == "w1"
    finally:
        for searcher in (off, on, without):
            searcher.close()


def test_passages_in_qdrant_client_local_mode_give_the_same_maxp(passage_home, encoder):
    from scix_core.ingest import ingest

    cfg = passage_home.replace(**{"vectors.backend": "qdrant"})
    ingest(CORPUS, "client", config=cfg, progress=False, encoder=encoder, passages=True)
    edge, client = Searcher("with", passage_home), Searcher("client", cfg)
    try:
        (_, a), (_, b) = _dense(edge), _dense(client)
        assert a.keys() == b.keys() and all(abs(a[k] - b[k]) < 1e-3 for k in a)
    finally:
        edge.close()
        client.close()


def test_passages_without_vectors_is_a_config_error(tmp_path):
    from scix_core.ingest import ingest

    with pytest.raises(ConfigError, match="--no-embed"):
        ingest(
            CORPUS,
            "bad",
            config=load_config().replace(home=tmp_path),
            progress=False,
            embed=False,
            passages=True,
        )


def test_info_counts_the_passages(passage_home, monkeypatch, capsys):
    import json

    from scix_core.cli.main import main
    from scix_core.workspace import Workspace, read_json

    monkeypatch.setenv("SCIX_HOME", str(passage_home.home))
    assert main(["info", "--index", "with", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    manifest = read_json(Workspace(passage_home.home).index_dir("with") / "manifest.json")
    assert info["passages"] == manifest["passages"] > 0 and "passages" in info["sizes_bytes"]
    assert main(["info", "--index", "without", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["passages"] == 0


def test_unreadable_passages_leave_the_papers_own_vectors_with_a_note(passage_home, encoder):
    import shutil

    from scix_core.ingest import ingest
    from scix_core.workspace import Workspace

    ingest(CORPUS, "broken", config=passage_home, progress=False, encoder=encoder, passages=True)
    shard = Workspace(passage_home.home).index_dir("broken") / "passages"
    shutil.rmtree(shard)
    shard.mkdir()  # an empty folder where the shard was
    searcher, plain = Searcher("broken", passage_home), Searcher("without", passage_home)
    try:
        result, scores = _dense(searcher)
        assert not result.metadata["dense_passages"]
        assert any("passage vectors unavailable" in n for n in result.metadata["notes"]), result.metadata[
            "notes"
        ]
        assert scores == pytest.approx(_dense(plain)[1], abs=1e-6)  # the papers' own vectors still answer
    finally:
        searcher.close()
        plain.close()
