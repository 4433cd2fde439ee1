"""``scix tune``: from a gold set to the best search pipeline for a collection, chosen by honest
cross-validation.

report = tune("scifact", split="train", space=load_space("fusion.toml"), budget_s=900)
report.print(console); report.write_json("reports/tune/scifact.json")

The judged queries are dealt into K seeded folds. The lanes every candidate fuses are built once
(:mod:`scix_core.tune.pieces`): the lexical lanes under each semantics, the index's encoder exact over the
papers and their passages, and — when the space fine-tunes — an encoder per set of excluded folds, trained
on the other folds' queries only and scoring only the excluded ones. Every candidate of the space
(:mod:`scix_core.tune.space`) is then the pipeline's own fusion step over those lanes, scored per query;
:mod:`scix_core.tune.select` makes the CV table, the winner, the nested estimate of tuning itself and what
each choice is worth. When the space lists rerankers, they are tried on the first-stage pipelines chosen
without them (:mod:`scix_core.tune.rerank`), and each outer fold chooses again between its pick and its pick
reranked. The nested estimate meets the defaults in paired randomisation tests over every
metric, Holm-corrected, and the gate decides on them: the nested estimate has already paid for choosing
among the candidates. The winner and each choice's best alone are compared with the defaults too, Holm over
those candidates. Only a SHIP writes anything: the preset ``indexes/NAME/tuned.toml`` and, when
the winner needs them, the fine-tuned encoder and the index rebuilt with it and its passages
(:mod:`scix_core.tune.preset`).

``budget_s`` stops building pieces when the next one would not finish in time; the candidates that need the
missing pieces are left out and the report says so. ``resume`` keeps the pieces of an earlier run with the
same key.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from scix_core.config import Config, load_config
from scix_core.embeddings.encoder import Encoder, query_embedding
from scix_core.errors import ConfigError, ModelUnavailableError
from scix_core.evaluate import encoder_training_queries, sample_queries, uncapped_pool
from scix_core.evaluate.gold import Gold, from_index, training_queries
from scix_core.evaluate.metrics import METRICS
from scix_core.evaluate.runs import DEPTH
from scix_core.evaluate.significance import GateDecision, compare, gate, holm
from scix_core.ingest import ingest
from scix_core.search import Searcher
from scix_core.search.options import reranks
from scix_core.search.stages.rerank import reranker_path
from scix_core.train.encoder import Recipe, hybrid_rankings, train_encoder, triples
from scix_core.train.query_side import QueryRecipe, Targets, index_encoders, positives, train_query_encoder
from scix_core.train.reranker import RerankRecipe, train_reranker
from scix_core.tune import preset
from scix_core.tune.pieces import (
    Folds,
    PieceStore,
    dense_lanes,
    fine_tuned_lanes,
    lexical_lanes,
    models_needed,
    query_side_lanes,
    run_key,
)
from scix_core.tune.report import TuneReport
from scix_core.tune.rerank import FINE_TUNED, RerankStage, excluded_of, fingerprint
from scix_core.tune.select import DEFAULTS, TUNED, best, cv_table, fused, nested, values_of, worth
from scix_core.tune.space import Candidate, Fusion, Space, load_space
from scix_core.types import Ranking
from scix_core.workspace import Workspace

FOLDS = 5
SEED = 13


def defaults_of(cfg: Config, manifest: Mapping) -> Candidate:
    """The pipeline ``cfg`` runs on this index today (the candidate every other one is compared with)."""
    s = cfg.search
    fusion = (
        Fusion("rrf", float(s.rrf_k)) if s.fusion == "rrf" else Fusion(s.convex_normalise, s.convex_alpha)
    )
    return Candidate(0, bool(manifest.get("passages")) and s.passages, s.lexical_mode, fusion)


def parse_budget(text: str | None) -> float | None:
    """``2h``, ``90m``, ``1h30m``, ``45s`` or plain seconds -> seconds (None: no budget)."""
    import re

    if text is None:
        return None
    raw = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", raw):
        return float(raw)
    parts = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", raw)
    if not raw or not parts or not any(parts.groups()):
        raise ConfigError(f"--budget {text!r}: expected e.g. 2h, 90m, 1h30m, 45s or seconds")
    h, m, s = (int(g or 0) for g in parts.groups())
    return float(h * 3600 + m * 60 + s)


class _Clock:
    """The budget: a piece is started only when it is expected to finish in time (the last piece of its kind
    took this long)."""

    def __init__(self, budget_s: float | None):
        self.start = time.perf_counter()
        self.deadline = None if budget_s is None else self.start + budget_s
        self.took: dict[str, float] = {}

    def allows(self, kind: str) -> bool:
        if self.deadline is None:
            return True
        return time.perf_counter() + self.took.get(kind, 0.0) <= self.deadline

    def timed(self, kind: str, started: float) -> None:
        self.took[kind] = time.perf_counter() - started


def tune(
    index: str,
    gold: Gold | None = None,
    split: str | None = None,
    config: Config | None = None,
    space: Space | None = None,
    folds: int = FOLDS,
    seed: int = SEED,
    budget_s: float | None = None,
    resume: bool = False,
    permutations: int = 10_000,
    metrics: tuple[str, ...] = METRICS,
    progress: bool = True,
    write: bool = True,
    recipe=None,
    query_recipe=None,
    group_folds: bool = False,
    rerank_recipe=None,
) -> TuneReport:
    """Tune the search pipeline of ``index`` on ``gold`` (default: the index's own qrels of ``split``: its
    only split, else train)."""
    from tqdm.auto import tqdm

    space = space or Space()
    recipe = recipe or Recipe(seed=seed)
    query_recipe = query_recipe or QueryRecipe(seed=seed)
    rerank_recipe = rerank_recipe or RerankRecipe(seed=seed)
    if folds < 2:
        raise ConfigError(f"--folds must be at least 2, got {folds}")
    cfg = (config or load_config()).replace(**{"search.depth": DEPTH})
    clock = _Clock(budget_s)
    primary, notes = metrics[0], []
    with uncapped_pool():
        searcher = Searcher(index, cfg)
        manifest = dict(searcher.manifest)
        gold = gold or from_index(searcher.store, split)
        trained = encoder_training_queries(searcher, gold)
        if trained:
            notes.append(f"{len(trained)} queries the index's encoder was trained on are left out")
        rerankers = {m: reranker_path(m, cfg.home) for m in space.rerankers if m != FINE_TUNED}
        for model, path in rerankers.items():
            if not path.exists():
                raise ModelUnavailableError(
                    f"space.rerankers: no cross-encoder {model!r} (a path, or a reranker trained into the "
                    "workspace by `scix train-reranker`)"
                )
            seen = training_queries(path, index, manifest.get("corpus_hash"))
            seen = set() if seen is None else set(gold.judged) if "*" in seen else seen & set(gold.judged)
            if seen - trained:
                notes.append(
                    f"{len(seen - trained)} queries the reranker {model!r} was trained on are left out"
                )
            trained |= seen
        gold = sample_queries(gold, None, seed, trained)
        ids = list(gold.judged)
        if len(ids) < 2 * folds:
            raise ConfigError(f"{len(ids)} judged queries cannot make {folds} folds of at least two queries")
        dealt = Folds.deal(ids, folds, seed, gold if group_folds else None)
        if group_folds and not dealt.grouped:
            notes.append(
                "queries share relevant papers across any split into folds (one group holds more than a "
                "fold): the folds are dealt at random"
            )
        defaults = defaults_of(cfg, manifest)
        if reranks(cfg.search.rerank) and cfg.search.rerank not in space.rerankers:
            notes.append(
                f"your configuration reranks with {cfg.search.rerank!r}: the defaults here are its first "
                f"stage (--reranker {cfg.search.rerank} tries the reranker too)"
            )
        epochs = [e for e in space.epochs if e > 0]
        qepochs = list(space.query_epochs)
        fine_tuned_reranker = FINE_TUNED in space.rerankers
        smallest = min(len(dealt.training(f, g)) for f in range(folds) for g in range(folds) if f != g)
        if (epochs or qepochs or fine_tuned_reranker) and smallest < space.min_train_queries:
            notes.append(
                f"folds too small to fine-tune: the inner training sets hold {smallest} queries, fewer than "
                f"space.min_train_queries = {space.min_train_queries}; the encoder stays as shipped and the "
                "other choices are tuned"
            )
            epochs, qepochs, fine_tuned_reranker = [], [], False
        queries = {q: gold.queries[q] for q in ids}
        # the pieces hold the MaxP lane too: the fine-tuned ones when the space reads passages, the index's
        # encoder's also when the defaults do (an index with passage vectors)
        passages = True in space.passages
        shipped_passages = passages or defaults.passages
        extra = {
            "recipe": recipe.__dict__,
            "query_recipe": query_recipe.__dict__,
            "base": cfg.embedding.model,
            "passages": [passages, shipped_passages],
        }
        if space.rerankers:  # (only then: the keys of runs without a reranker stay as they were)
            extra["rerank_recipe"] = rerank_recipe.__dict__
            # a cross-encoder retrained under the same name scores anew
            extra["rerankers"] = {m: fingerprint(p) for m, p in sorted(rerankers.items())}
        key = run_key(manifest, gold, dealt, seed, extra)
        store = PieceStore(Workspace(cfg.home).home / "tune" / index / key, key, resume)
        plan = [f"lexical-{m}" for m in space.lexical] + ["dense-shipped"]
        if epochs or fine_tuned_reranker:
            plan.append("hybrid")
            plan += [f"dense-ft{e}-x{'-'.join(map(str, x))}" for e in epochs for x in models_needed(dealt)]
        plan += [f"dense-q{e}-x{'-'.join(map(str, x))}" for e in qepochs for x in models_needed(dealt)]
        built: dict[str, dict] = {}
        left: list[str] = []
        bar = tqdm(total=len(plan), desc="tune pieces", disable=not progress)
        papers = list(searcher.store.papers())
        texts = {p.paper_id: p.text for p in papers}  # what a fine-tuning's triples are made of
        row = {p.paper_id: i for i, p in enumerate(papers)}
        targets = None  # the index's vectors a query side learns against, read when the first needs them
        corpus, encode = index_encoders(cfg, manifest, progress)
        for name in plan:
            loaded = store.load(name)
            if loaded is not None:
                built[name] = loaded
                bar.update()
                continue
            kind = name.split("-x")[0]
            if not clock.allows(kind):
                left.append(name)
                continue
            bar.set_postfix_str(name)
            started = time.perf_counter()
            if name.startswith("lexical-"):
                mode = name.removeprefix("lexical-")
                lanes_searcher = Searcher(index, cfg.replace(**{"search.lexical_mode": mode}))
                built[name] = lexical_lanes(lanes_searcher, queries, DEPTH, progress)
                lanes_searcher.close()
                store.save(name, built[name])
            elif name == "dense-shipped":
                built[name] = dense_lanes(corpus, encode, papers, queries, DEPTH, shipped_passages, manifest)
                store.save(name, built[name])
            elif name == "hybrid":
                depth = max(recipe.depth, rerank_recipe.depth) if fine_tuned_reranker else recipe.depth
                ranked = hybrid_rankings(searcher, queries, depth, progress)
                built[name] = {q: {"hybrid": r.ranking()} for q, r in ranked.items()}
                store.save(name, built[name])
            elif name.startswith("dense-q"):
                _, e, excluded = _model(name)
                train_ids = dealt.training(*excluded)
                if targets is None:
                    targets = Targets.of(corpus, papers, manifest, passages)
                held = {q: queries[q] for q in dealt.queries(*excluded)}
                built[name] = query_side_lanes(
                    positives(gold, train_ids, row),
                    targets,
                    replace(query_recipe, epochs=e),
                    cfg,
                    manifest,
                    corpus,
                    papers,
                    held,
                    DEPTH,
                    passages,
                    progress,
                )
                store.save(name, built[name], epochs=e, excluded=list(excluded), trained_on=sorted(train_ids))
            else:
                searcher.close(keep_vectors=False)  # fine-tuning takes long: free the index (idempotent)
                _, e, excluded = _model(name)
                train_ids = dealt.training(*excluded)
                ranked = {q: built["hybrid"][q]["hybrid"].ids for q in train_ids}
                examples = triples(gold, train_ids, ranked, texts, replace(recipe, epochs=e))
                held = {q: queries[q] for q in dealt.queries(*excluded)}
                built[name] = fine_tuned_lanes(
                    cfg.embedding.model,
                    examples,
                    replace(recipe, epochs=e),
                    cfg,
                    manifest,
                    papers,
                    held,
                    DEPTH,
                    passages,
                    progress,
                )
                store.save(name, built[name], epochs=e, excluded=list(excluded), trained_on=sorted(train_ids))
            clock.timed(kind, started)
            bar.update()
        bar.close()
        searcher.close(keep_vectors=False)
    covered_epochs = [0] + [e for e in epochs if all(not n.startswith(f"dense-ft{e}-") for n in left)]
    covered_q = [0] + [e for e in qepochs if all(not n.startswith(f"dense-q{e}-") for n in left)]
    missing_base = [n for n in left if not n.startswith(("dense-ft", "dense-q"))]
    if missing_base:
        raise ConfigError(
            f"the budget ran out before the first pieces were built ({', '.join(missing_base)}): give a "
            "larger --budget, or --resume the run later"
        )
    if len(covered_epochs) <= len(epochs) or len(covered_q) <= len(qepochs):
        notes.append(
            f"the budget stopped fine-tuning: {len(left)} of {len(plan)} pieces not built; candidates "
            f"fine-tuned for {sorted(set(epochs) - set(covered_epochs))} epochs (both towers) and "
            f"{sorted(set(qepochs) - set(covered_q))} (the query side) are left out (--resume continues)"
        )
    candidates = [c for c in space.candidates() if c.epochs in covered_epochs and c.query_epochs in covered_q]
    if defaults not in candidates:
        candidates.insert(0, defaults)
    plain, inner = _values(candidates, built, dealt, gold, metrics, primary, progress)

    def cv_mean(c: Candidate) -> float:
        return statistics.fmean(plain[c][primary].values())

    winner = best(candidates, cv_mean, defaults)
    models = [*rerankers, *([FINE_TUNED] if fine_tuned_reranker else [])]
    then = None
    if models:  # the reranker stage, on the first-stage pipelines chosen without it
        _, chosen = nested(candidates, plain, inner, dealt, primary, defaults)
        stage = RerankStage(space.rerank_window, store, clock, dealt, gold, queries, papers, cfg, progress)
        bases = list(dict.fromkeys([defaults, winner, *chosen]))
        prepared: dict = {}
        stages = {b: _stage_one(b, built, dealt, prepared, FINE_TUNED in models) for b in bases}
        covered_models = stage.build(models, stages, built, rerankers, rerank_recipe)
        for b in bases:
            for model in covered_models:
                c = b.reranked(model, space.rerank_window)
                plain[c], inner[c] = _values_of(
                    c, stage.stages[b], dealt, gold, metrics, primary, stage.reranker(model)
                )
                candidates.append(c)
        left += stage.left
        plan += stage.planned
        if set(models) - set(covered_models):
            notes.append(
                f"the budget stopped the reranker stage: {sorted(set(models) - set(covered_models))} not "
                "tried (--resume continues)"
            )

        def then(c: Candidate) -> list[Candidate]:
            return [c.reranked(m, space.rerank_window) for m in covered_models]

        winner = best([winner, *then(winner)], cv_mean, defaults)
    table = cv_table(plain, primary)
    tuned_values, chosen = nested(
        [c for c in candidates if not c.rerank], plain, inner, dealt, primary, defaults, then
    )
    alone = worth(candidates, plain, primary, defaults)
    values = {DEFAULTS: plain[defaults], TUNED: tuned_values}
    roles: dict[Candidate, list[str]] = {winner: ["winner"]} if winner != defaults else {}
    for choice, c in alone.items():  # each candidate once (the winner may be one choice's best alone)
        roles.setdefault(c, []).append(f"{choice} alone")
    values |= {f"{' · '.join(r)}: {c.name}": plain[c] for c, r in roles.items()}
    # the gate's family: tuning itself (the nested estimate, which already paid for the choice among the
    # candidates) against the defaults on every metric; the candidates compared form a family of their own
    gated = holm(compare(DEFAULTS, TUNED, values, metrics, permutations))
    others = [r for r in values if r not in (DEFAULTS, TUNED)]
    comparisons = gated + holm(
        [c for r in others for c in compare(DEFAULTS, r, values, metrics, permutations)]
    )
    decision = gate(gated, primary)
    if winner == defaults:
        decision = GateDecision(False, ("the defaults are the best candidate on cross-validation",))
    ledger = {
        str(f): {
            "test": sorted(dealt.queries(f)),
            "chose_on": sorted(dealt.training(f)),
            "models": {
                n: sorted(dealt.training(*_model(n)[2]))
                for n in built
                if n.startswith(("dense-ft", "dense-q", "rerank-ft")) and f in _model(n)[2]
            },
        }
        for f in range(folds)
    }
    report = TuneReport(
        index=index,
        gold=gold.name,
        primary=primary,
        metrics=tuple(metrics),
        n_queries=len(ids),
        folds=folds,
        table=tuple(table),
        defaults=defaults,
        winner=winner,
        fold_choices=tuple(chosen),
        runs={name: {m: statistics.fmean(v[m].values()) for m in metrics} for name, v in values.items()},
        worth=alone,
        comparisons=tuple(comparisons),
        decision=decision,
        covered={
            "pieces_planned": len(plan),
            "pieces_built": len(plan) - len(left),
            "left_out": left,
            "candidates": len(candidates),
            "encoder_epochs": covered_epochs,
            "query_epochs": covered_q,
            "folds_grouped": dealt.grouped,
            "rerankers": [c for c in models if any(x.rerank == c for x in candidates)],
        },
        notes=tuple(notes),
        seconds=time.perf_counter() - clock.start,
        ledger=ledger,
        setup={
            "space": space.to_dict(),
            "seed": seed,
            "permutations": permutations,
            "depth": DEPTH,
            "lexical_pool": "inf",
            "run_key": key,
            "pieces": str(store.folder),
            "recipe": recipe.__dict__,
            "query_recipe": query_recipe.__dict__,
            "rerank_recipe": rerank_recipe.__dict__ if fine_tuned_reranker else None,
            "base_model": cfg.embedding.model,
            "corpus_hash": manifest.get("corpus_hash"),
        },
    )
    if decision.ship and write:
        recipes = (
            recipe,
            replace(query_recipe, epochs=report.winner.query_epochs or query_recipe.epochs),
            rerank_recipe,
        )
        report = replace(
            report, preset=str(_ship(report, cfg, index, manifest, gold, recipes, passages, progress))
        )
    return report


def _model(name: str) -> tuple[str, int, tuple[int, ...]]:
    """``dense-ftE-xF[-G]`` / ``dense-qE-xF[-G]`` -> ("ft" / "q", E, (F[, G])); ``rerank-ft-xF[-G]`` ->
    ("rerank", 0, (F[, G]))."""
    head, _, folds = name.partition("-x")
    if head == "rerank-ft":
        return "rerank", 0, excluded_of(name)
    kind = "ft" if head.startswith("dense-ft") else "q"
    return kind, int(head.removeprefix(f"dense-{kind}")), tuple(int(f) for f in folds.split("-"))


def _stage_one(
    c: Candidate, built, dealt: Folds, prepared: dict, pairs: bool
) -> dict[tuple[int, ...], dict[str, Ranking]]:
    """The fused rankings of ``c``'s first stage, by the folds the pieces that ranked them were built
    without: ``(F,)`` -> fold F's queries (the plain cross-validation); with ``pairs`` (or a fine-tuned
    encoder) also ``(F, G)`` -> the queries of folds F and G (the inner cross-validation of outer folds F and
    G). The index's encoder was built without no fold: its pairs are the same rankings, only wanted where a
    fold-specific reranker reads them."""
    lexical = built[f"lexical-{c.lexical}"]
    shipped = c.encoder == "shipped"
    out = {}
    for f in range(dealt.k):
        dense = built["dense-shipped"] if shipped else built[f"dense-{c.encoder}-x{f}"]
        out[(f,)] = fused(c, lexical, dense, dealt.queries(f), DEPTH, prepared)
    if shipped and not pairs:
        return out
    for f, g in models_needed(dealt)[dealt.k :]:
        if shipped:
            out[(f, g)] = {**out[(f,)], **out[(g,)]}
        else:
            dense = built[f"dense-{c.encoder}-x{f}-{g}"]
            out[(f, g)] = fused(c, lexical, dense, dealt.queries(f, g), DEPTH, prepared)
    return out


def _values_of(c: Candidate, stage, dealt: Folds, gold: Gold, metrics, primary: str, rerank=None):
    """metric -> query -> value of ``c`` (each query ranked with pieces built without it), and per outer
    fold the primary values of its training queries ranked without that fold; ``rerank(excluded, q,
    ranking)`` reranks the first stage's rankings."""
    if rerank is not None:
        stage = {x: {q: rerank(x, q, r) for q, r in ranked.items()} for x, ranked in stage.items()}
    plain = values_of(gold, {q: r for f in range(dealt.k) for q, r in stage[(f,)].items()}, metrics)
    if c.encoder == "shipped" and c.rerank != FINE_TUNED:  # nothing fold-specific: inner = plain
        return plain, {f: plain[primary] for f in range(dealt.k)}
    inner = {}
    for f in range(dealt.k):
        rankings = {q: stage[tuple(sorted((f, dealt.of[q])))][q] for q in dealt.training(f)}
        inner[f] = values_of(gold, rankings, (primary,))[primary]
    return plain, inner


def _values(candidates, built, dealt: Folds, gold: Gold, metrics, primary: str, progress: bool):
    """Per candidate: metric -> query id -> value (each query's lanes built without it), and per outer fold
    the primary values of its training queries ranked without that fold (the inner cross-validation)."""
    from tqdm.auto import tqdm

    plain, inner, prepared = {}, {}, {}
    for c in tqdm(candidates, desc="candidates", disable=not progress, leave=False):
        plain[c], inner[c] = _values_of(
            c, _stage_one(c, built, dealt, prepared, False), dealt, gold, metrics, primary
        )
    return plain, inner


def _ship(
    report: TuneReport,
    cfg: Config,
    index: str,
    manifest: Mapping,
    gold: Gold,
    recipes: tuple[Recipe, QueryRecipe, RerankRecipe],
    passages: bool,
    progress: bool,
) -> Path:
    """Write the preset; build the winner's encoder (every judged query) and the index to match. A query
    side is trained against the vectors its fold models learnt from (MaxP when the space read passages)."""
    winner = report.winner
    recipe, query_recipe, rerank_recipe = recipes
    encoder = query_model = None
    evidence = {
        "gold": f"{gold.name}, {report.n_queries} queries, {report.folds}-fold CV, "
        f"seed {report.setup['seed']}",
        f"{report.primary} CV": f"{report.row(winner).means[report.primary]:.4f} "
        f"(defaults {report.runs[DEFAULTS][report.primary]:.4f})",
        f"{report.primary} nested": f"{report.runs[TUNED][report.primary]:.4f}",
        "gate": "; ".join(report.decision.reasons),
    }
    if winner.epochs:
        trained = train_encoder(
            index,
            f"{index}-tuned",
            cfg,
            recipe=replace(recipe, epochs=winner.epochs),
            gold=gold,
            progress=progress,
        )
        encoder = str(trained.path)
    if winner.query_epochs:
        query = train_query_encoder(
            index,
            f"{index}-tuned-queries",
            cfg,
            recipe=query_recipe,
            gold=gold,
            passages=passages,
            progress=progress,
        )
        query_model = str(query.path)
        # its export for the index's backend made now, not by the first query the preset serves
        served = cfg.replace(**{"embedding.query_model": query_model})
        emb = query_embedding(served.embedding, dict(manifest), cfg.home)
        Encoder(emb, cfg.home).encode_query("warm-up")
    if winner.rerank == FINE_TUNED:  # trained on every judged query, as each fold's on its training queries
        reranker = train_reranker(
            index, f"{index}-tuned-reranker", cfg, recipe=rerank_recipe, gold=gold, progress=progress
        )
        winner = winner.reranked(reranker.name, winner.rerank_window)
    needs_build = encoder is not None or (winner.passages and not manifest.get("passages"))
    path = preset.write(cfg.home, index, preset.render(winner, encoder, evidence, query_model))
    if needs_build:
        source = preset.dataset_source(manifest)
        built_cfg = cfg.replace(**{"embedding.model": encoder}) if encoder else cfg
        if source is None:
            raise ConfigError(
                f"wrote {path}, but the sources of index {index!r} are gone: rebuild it with `scix ingest "
                f"--index {index} --force{' --passages' if winner.passages else ''}"
                f"{f' --model {encoder}' if encoder else ''}` from its data"
            )
        ingest(
            source,
            index,
            manifest.get("format"),
            config=built_cfg,
            limit=manifest.get("limit"),
            force=True,
            progress=progress,
            passages=winner.passages,
            sparse=bool(manifest.get("sparse")),
        )
    return path


__all__ = ["FOLDS", "Space", "TuneReport", "defaults_of", "load_space", "parse_budget", "tune"]
