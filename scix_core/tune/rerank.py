"""The reranker stage of a tuning run: a cross-encoder over a pipeline's fused top window, chosen stage-wise.

A cross-encoder re-scores every (query, paper) pair of the window it is given, about ten pairs a second on
two CPU cores: scoring the windows of every candidate of the space would cost hours for one model. So the
reranker is tried on the first-stage pipelines the run chose without it — the defaults, the CV winner and
each outer fold's choice — as candidates of their own (:meth:`Candidate.reranked`), and each outer fold
then chooses between its first-stage choice and that choice reranked on its training queries alone
(:func:`scix_core.tune.select.nested` with ``then``).

Each model's scores are a piece, built once and kept like the lanes:

* ``rerank-SLUG``: a cross-encoder you have (a workspace reranker's name or a path), run as the pipeline
  runs it (``search.rerank_max_length``, ``search.rerank_backend``), over every window any chosen pipeline
  needs; the queries it was trained on never reach the run (they are left out of the gold set).
* ``rerank-ft-xF[-G]``: a cross-encoder fine-tuned as ``scix train-reranker`` fine-tunes one (the configured
  embedding model with a fresh head, hard negatives from the untrained hybrid ranking) on the queries of
  every fold but ``F`` (and ``G``), scoring the windows of those folds' queries only: the folds-but-one
  models score the plain cross-validation, the folds-but-two models the inner one, as for the encoders.

A reranked ranking is the window in the cross-encoder's order followed by the fused ranking's tail — what the
pipeline returns at every limit: the reranked window for a page of up to 20 results, the fused ranking
above that (the stage is bypassed), so recall at 50 and 100 stays the first stage's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from scix_core.embeddings.encoder import model_slug
from scix_core.search.stages.rerank import CrossEncoderReranker, passage
from scix_core.train.reranker import fine_tune, groups
from scix_core.types import Ranking, ScoredPaper

FINE_TUNED = "fine-tuned"

Windows = dict[str, dict[str, set[str]]]  # piece -> query id -> the papers its windows hold


def piece_name(model: str, excluded: tuple[int, ...]) -> str:
    """The piece holding ``model``'s scores for queries ranked by pieces built without folds ``excluded``."""
    if model == FINE_TUNED:
        return f"rerank-ft-x{'-'.join(map(str, excluded))}"
    return f"rerank-{model_slug(model)}"


def excluded_of(name: str) -> tuple[int, ...]:
    """``rerank-ft-xF[-G]`` -> (F[, G])."""
    return tuple(int(f) for f in name.partition("-x")[2].split("-"))


def fingerprint(path: Path) -> list:
    """A cross-encoder's path and its files' total size and latest time: what its kept scores depend on."""
    files = [path] if path.is_file() else sorted(f for f in path.rglob("*") if f.is_file())
    return [
        str(path),
        sum(f.stat().st_size for f in files),
        max((f.stat().st_mtime_ns for f in files), default=0),
    ]


def windows(
    model: str, stage_one: Iterable[Mapping[tuple[int, ...], Mapping[str, Ranking]]], window: int
) -> Windows:
    """Every (query, paper) pair ``model`` must score: the top ``window`` of each first-stage ranking
    (``stage_one``: per pipeline, the excluded folds of the pieces that ranked a query -> query -> ranking),
    by the piece that scores it."""
    out: Windows = {}
    for rankings in stage_one:
        for excluded, ranked in rankings.items():
            piece = out.setdefault(piece_name(model, excluded), {})
            for q, ranking in ranked.items():
                piece.setdefault(q, set()).update(ranking.ids[:window])
    return out


def missing(
    needed: Mapping[str, set[str]], scores: Mapping[str, Mapping[str, float]]
) -> dict[str, list[str]]:
    """query id -> the needed papers ``scores`` lacks."""
    out = {}
    for q, papers in needed.items():
        lacking = sorted(p for p in papers if p not in scores.get(q, {}))
        if lacking:
            out[q] = lacking
    return out


def score(
    predict: Callable[[str, list[str]], Sequence[float]],
    pairs: Mapping[str, Sequence[str]],
    queries: Mapping[str, str],
    texts: Mapping[str, str],
    progress: bool = False,
) -> dict[str, dict[str, float]]:
    """query id -> paper -> the cross-encoder's score of (the query's text, the paper's title + abstract)."""
    from tqdm.auto import tqdm

    out = {}
    for q, papers in tqdm(pairs.items(), desc="rerank scores", disable=not progress, leave=False):
        kept = [p for p in papers if p in texts]
        out[q] = dict(zip(kept, map(float, predict(queries[q], [texts[p] for p in kept]))))
    return out


def reranked(ranking: Ranking, scores: Mapping[str, float], window: int) -> Ranking:
    """The top ``window`` of ``ranking`` in the order of ``scores`` (ties: the fused order), then the rest of
    it; the window's scores are the cross-encoder's, the tail's the fusion's."""
    head = [i for i in ranking.items[:window] if i.paper_id in scores]
    order = sorted(range(len(head)), key=lambda j: (-scores[head[j].paper_id], j))
    top = [ScoredPaper(head[j].paper_id, scores[head[j].paper_id]) for j in order]
    kept = {i.paper_id for i in head}
    tail = [i for i in ranking.items if i.paper_id not in kept]
    return Ranking("rerank", tuple(top + tail))


def as_piece(scores: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, Ranking]]:
    """Scores in the piece store's shape (query id -> "rerank" -> a ranking of the scored papers)."""
    return {
        q: {"rerank": Ranking.from_pairs("rerank", sorted(s.items(), key=lambda x: -x[1]))}
        for q, s in scores.items()
    }


def from_piece(piece: Mapping[str, Mapping[str, Ranking]] | None) -> dict[str, dict[str, float]]:
    if not piece:
        return {}
    return {q: {i.paper_id: i.score for i in lanes["rerank"].items} for q, lanes in piece.items()}


def fold_model(base: str, data: list, recipe, device: str | None, max_length: int, progress: bool = False):
    """A cross-encoder fine-tuned on ``data`` (:func:`scix_core.train.reranker.fine_tune`), scoring as the
    pipeline scores: pairs cut at ``max_length`` tokens, the sigmoid's order."""
    model, _ = fine_tune(base, data, recipe, device, progress=progress)
    model.max_seq_length = max_length

    def predict(query: str, passages: list[str]) -> Sequence[float]:
        if not passages:
            return []
        return model.predict([(query, p) for p in passages], batch_size=32, show_progress_bar=False).tolist()

    return predict


def external(path: Path, cfg, window: int):
    """A cross-encoder you have, run as the pipeline's rerank stage runs it."""
    s = cfg.search
    scorer = CrossEncoderReranker(
        path, window, max_length=s.rerank_max_length, device=cfg.embedding.device, backend=s.rerank_backend
    )
    return scorer.scores


class RerankStage:
    """The reranker pieces the chosen first-stage pipelines need, built under the run's budget, and the
    reranking of their rankings."""

    def __init__(
        self, window: int, store, clock, folds, gold, queries: Mapping[str, str], papers, cfg, progress
    ):
        self.window, self.store, self.clock, self.folds = window, store, clock, folds
        self.gold, self.queries, self.cfg, self.progress = gold, queries, cfg, progress
        self.texts = {p.paper_id: passage(p.title, p.abstract) for p in papers}  # what the stage reads
        self.scores: dict[str, dict[str, dict[str, float]]] = {}  # piece -> query id -> paper -> score
        self.stages: dict = {}  # first-stage pipeline -> its rankings by excluded folds
        self.planned: list[str] = []
        self.left: list[str] = []  # pieces the budget left unbuilt

    def build(self, models: Sequence[str], stages: Mapping, built: dict, paths: Mapping[str, Path], recipe):
        """Build every piece of ``models`` the ``stages`` need; the models whose pieces are all built."""
        self.stages = dict(stages)
        covered = []
        for model in models:
            need = windows(model, self.stages.values(), self.window)
            names = sorted(need, key=lambda n: (len(n), n))  # the folds-but-one models first
            self.planned += names
            done = [self._piece(n, model, need[n], built, paths, recipe) for n in names]
            if all(done):
                covered.append(model)
        return covered

    def _piece(self, name: str, model: str, needed, built: dict, paths, recipe) -> bool:
        scores = from_piece(self.store.load(name))
        lacking = missing(needed, scores)
        kind = "rerank-ft" if model == FINE_TUNED else name
        if lacking:
            if not self.clock.allows(kind):
                self.left.append(name)
                return False
            started = time.perf_counter()
            if model == FINE_TUNED:  # (deterministic: a rebuilt model scores what the kept one did)
                excluded = excluded_of(name)
                train = self.folds.training(*excluded)
                ranked = {q: built["hybrid"][q]["hybrid"].ids for q in train}
                data = groups(self.gold, train, ranked, self.texts, recipe)
                predict = fold_model(
                    self.cfg.embedding.model,
                    data,
                    recipe,
                    self.cfg.embedding.device,
                    self.cfg.search.rerank_max_length,
                    self.progress,
                )
                scores = score(predict, {q: sorted(p) for q, p in needed.items()}, self.queries, self.texts)
                info = {"excluded": list(excluded), "trained_on": sorted(train)}
            else:
                predict = external(paths[model], self.cfg, self.window)
                for q, s in score(predict, lacking, self.queries, self.texts, self.progress).items():
                    scores.setdefault(q, {}).update(s)
                info = {"path": str(paths[model])}
            self.store.save(name, as_piece(scores), model=model, **info)
            self.clock.timed(kind, started)
        self.scores[name] = scores
        built[name] = {}  # (named for the run's ledger; the scores are kept here)
        return True

    def reranker(self, model: str) -> Callable[[tuple[int, ...], str, Ranking], Ranking]:
        """(excluded folds, query id, first-stage ranking) -> the ranking reranked by ``model``'s piece for
        those folds."""

        def rerank(excluded: tuple[int, ...], q: str, ranking: Ranking) -> Ranking:
            return reranked(ranking, self.scores[piece_name(model, excluded)].get(q, {}), self.window)

        return rerank
