"""Cross-encoder rerank with a tiny locally trained model, and the chat rewriter against a loopback server."""

from __future__ import annotations

import http.server
import json
import threading

import pytest

from scix_core.errors import ConfigError, ModelUnavailableError
from scix_core.search import Searcher
from scix_core.workspace import Workspace, read_json

pytestmark = [pytest.mark.model]


@pytest.fixture(scope="module")
def searcher(built):
    return Searcher(built.index, built.config)


def test_trained_model_lands_in_the_workspace_with_a_manifest(built, tiny_reranker):
    folder = Workspace(built.config.home).model_dir("rerankers", tiny_reranker)
    manifest = read_json(folder / "scix_manifest.json")
    assert manifest["kind"] == "cross-encoder" and manifest["base_model"] == "bundled-minilm"
    assert manifest["split"] == "train" and manifest["queries"] == 4 and len(manifest["query_ids"]) == 4
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".")], "no temp folder left behind"
    assert manifest["recipe"]["loss"] == "bce" and manifest["negatives"] == 2 * manifest["positives"]
    assert manifest["hard_negatives"] == "hybrid ranks 3-30 not judged relevant"


def test_groups_draw_hard_negatives_below_the_skipped_top():
    from scix_core.evaluate.gold import Gold
    from scix_core.train.reranker import RerankRecipe, groups

    gold = Gold("g", {"q": "query", "none": "no pool"}, {"q": {"a": 1, "c": 1, "x": 0}, "none": {"a": 1}})
    texts = {d: f"text {d}" for d in "abcdefg"}
    ranked = {"q": list("abcdefg"), "none": list("ab")}
    recipe = RerankRecipe(negatives=3, skip=2, depth=6)
    out = groups(gold, ["q", "none"], ranked, texts, recipe)
    # positives a and c; negatives from ranks 3-6 (c d e f) minus the relevant c: d, e, f; "none" has no pool
    assert [(g[0], g[2]) for g in out] == [("q", "text a"), ("q", "text c")]
    assert all(sorted(g[3]) == ["text d", "text e", "text f"] for g in out)
    with pytest.raises(ConfigError):
        RerankRecipe(negatives=0)


@pytest.mark.parametrize("loss", ["bce", "mnrl", "lambda"])
def test_learning_curve_scores_only_held_out_queries(built, loss):
    from scix_core.train.reranker import RerankRecipe, learning_curve

    recipe = RerankRecipe(epochs=1, batch_size=2, negatives=2, loss=loss)
    curve = learning_curve(
        built.index, built.config, recipe=recipe, every=2, window=5, folds=3, progress=False
    )
    judged = 6
    assert curve.held_out == 2 and curve.held_out + curve.trained_on == judged
    steps = [p.step for p in curve.points]
    assert steps[0] == 0 and steps == sorted(set(steps)) and all(s % 2 == 0 or s == steps[-1] for s in steps)
    assert all(0 <= p.ndcg <= 1 and p.spread >= 0 for p in curve.points)
    assert 0 < curve.hybrid <= 1
    assert curve.to_dict()["points"][0]["step"] == 0


def test_rerank_rescores_the_window_with_sigmoid(searcher, tiny_reranker):
    result = searcher.search("dark matter halos", limit=5, rerank=tiny_reranker, boosts=False)
    assert result.metadata["reranked"] is True and result.metadata["stages"]["rerank"] == "ran"
    assert result.timing_ms["rerank"] > 0
    reranked = result.rankings["rerank"]
    assert len(reranked) == min(50, result.total)  # the whole fused window, not just the hits
    assert set(reranked.ids) == set(result.rankings["fused"].ids[:50])
    assert all(0.0 <= i.score <= 1.0 for i in reranked.items)
    assert [h.score for h in result.hits] == [i.score for i in reranked.items[:5]]
    assert all(h.fused_score == result.rankings["fused"].scores()[h.paper_id] for h in result.hits)


def test_rerank_then_boosts_uses_the_sigmoid_as_base(searcher, tiny_reranker):
    result = searcher.search(
        "Galaxy rotation curves and the dark matter problem", limit=3, rerank=tiny_reranker, boosts=True
    )
    top = result.rankings["boosts"].items[0]
    assert top.paper_id == "p04" and dict(top.detail)["title"] == 2.0
    assert dict(top.detail)["base"] == pytest.approx(result.rankings["rerank"].scores()["p04"])


def test_rerank_is_bypassed_above_limit_20(searcher, tiny_reranker):
    result = searcher.search("dark matter halos", limit=21, rerank=tiny_reranker)
    assert result.metadata["reranked"] is False
    assert result.metadata["rerank_reason"] == "bypassed: limit 21 > 20" and "rerank" not in result.timing_ms


def test_a_window_not_above_the_limit_is_refused(built, tiny_reranker):
    small = Searcher(built.index, built.config.replace(**{"search.rerank_window": 10}))
    with pytest.raises(ConfigError, match="rerank window 10 must exceed the result count 10"):
        small.search("dark matter", limit=10, rerank=tiny_reranker)
    assert small.search("dark matter", limit=9, rerank=tiny_reranker).metadata["reranked"] is True


def test_a_configured_run_that_reranks_is_scored_on_the_reranked_window(built, tiny_reranker):
    """`--run NAME:search.rerank=…` reranks (at limit 100 the stage would be bypassed): the same values as
    ``hybrid+rerank``, query by query."""
    from scix_core.evaluate import config_runs, evaluate

    runs = config_runs([f"rr:search.rerank={tiny_reranker}"], config=built.config)
    report = evaluate(
        built.index,
        runs=("hybrid", "hybrid+rerank"),
        config=built.config,
        reranker=tiny_reranker,
        permutations=200,
        configured=runs,
    )
    assert report.per_query["rr"] == report.per_query["hybrid+rerank"]
    assert report.per_query["rr"] != report.per_query["hybrid"]


def test_missing_reranker_is_a_typed_error(searcher, tmp_path):
    with pytest.raises(ModelUnavailableError, match="scix train-reranker"):
        searcher.search("dark matter", rerank=str(tmp_path / "nowhere"))
    assert searcher.search("dark matter", rerank="off").metadata["rerank_reason"] == "off"


class _Chat(http.server.BaseHTTPRequestHandler):
    replies: list = []
    seen: list = []

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append((self.path, body))
        status, payload = self.replies.pop(0)
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def chat_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Chat)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Chat.replies, _Chat.seen = [], []
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", _Chat
    server.shutdown()


def test_chat_rewriter_against_a_loopback_server(searcher, chat_server):
    url, chat = chat_server
    chat.replies.append(
        (200, {"choices": [{"message": {"content": '"convolutional neural network galaxy morphology"'}}]})
    )
    result = searcher.search("deep nets for galaxy shapes", limit=3, rewrite=url)
    assert result.metadata["rewrite"] == {
        "mode": url,
        "status": "rewritten",
        "text": "convolutional neural network galaxy morphology",
    }
    assert result.rankings["lexical"].ids[0] == "p09"  # the rewritten terms reach the lexical lane
    path, body = chat.seen[0]
    assert path == "/v1/chat/completions" and body["messages"][-1]["content"] == "deep nets for galaxy shapes"


@pytest.mark.parametrize(
    "reply",
    [(500, {"error": "boom"}), (200, {"choices": []}), (200, {"choices": [{"message": {"content": " "}}]})],
)
def test_chat_rewriter_failure_keeps_the_query_as_typed(searcher, chat_server, reply):
    url, chat = chat_server
    chat.replies.append(reply)
    result = searcher.search("deep nets for galaxy shapes", limit=3, rewrite=url)
    assert result.metadata["rewrite"]["status"].startswith("failed:")
    assert result.metadata["lexical_terms"] == ["deep", "nets", "galaxy", "shapes"] and result.hits


def test_unreachable_rewriter_keeps_the_query(searcher):
    result = searcher.search("deep nets for galaxy shapes", limit=3, rewrite="http://127.0.0.1:1/v1")
    assert "ConnectError" in result.metadata["rewrite"]["status"] and result.hits


@pytest.fixture(scope="module")
def rerank_exports(tmp_path_factory):
    """The user cache of this module's ONNX reranker exports (none from before): a test after the first reads
    the export the first made (4 s each on a fast core)."""
    return tmp_path_factory.mktemp("rerank-user-cache")


def test_onnx_reranker_scores_like_torch(built, tiny_reranker, rerank_exports, monkeypatch):
    from scipy.stats import spearmanr

    from scix_core.search.stages.rerank import CrossEncoderReranker

    monkeypatch.setenv("XDG_CACHE_HOME", str(rerank_exports))
    path = Workspace(built.config.home).model_dir("rerankers", tiny_reranker)
    passages = [
        "Dark matter halos in cosmological simulations.",
        "Graph neural networks for molecules.",
        "A long passage about galaxies. " * 200,
        "Ünïcödé résumé — β-decay",
    ]
    ref = CrossEncoderReranker(path).scores("dark matter halos", passages)
    fp32 = CrossEncoderReranker(path, backend="onnx").scores("dark matter halos", passages)
    int8 = CrossEncoderReranker(path, backend="onnx-int8").scores("dark matter halos", passages)
    assert max(abs(a - b) for a, b in zip(ref, fp32)) < 1e-4
    assert max(abs(a - b) for a, b in zip(ref, int8)) < 0.05 and spearmanr(ref, int8).statistic > 0.7
    assert list(rerank_exports.glob("scix_core/onnx/rerank-*/model-int8.onnx"))
    # pairs are batched by length: scores come back in input order whatever the batch size
    one_batch = CrossEncoderReranker(path, backend="onnx", batch_size=1).scores("dark matter halos", passages)
    assert one_batch == pytest.approx(fp32, abs=1e-5)
    # a token cap truncates the long passage only, on either runtime alike
    capped = [
        CrossEncoderReranker(path, backend=b, max_length=64).scores("dark matter halos", passages)
        for b in ("torch", "onnx")
    ]
    assert capped[0] == pytest.approx(capped[1], abs=1e-4) and capped[0][:2] == pytest.approx(
        ref[:2], abs=1e-4
    )
    assert abs(capped[0][2] - ref[2]) > 1e-6
    with pytest.raises(Exception, match="rerank backend"):
        CrossEncoderReranker(path, backend="tensorrt")


def test_search_uses_the_configured_rerank_backend(built, tiny_reranker, rerank_exports, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(rerank_exports))
    torch_run = Searcher(built.index, built.config).search(
        "dark matter halos", limit=5, rerank=tiny_reranker, boosts=False
    )
    cfg = built.config.replace(**{"search.rerank_backend": "onnx"})
    onnx_run = Searcher(built.index, cfg).search(
        "dark matter halos", limit=5, rerank=tiny_reranker, boosts=False
    )
    assert onnx_run.metadata["reranked"] is True and onnx_run.ids == torch_run.ids
