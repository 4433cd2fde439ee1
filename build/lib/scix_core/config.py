"""One frozen configuration object, read from TOML with environment overrides.

Resolution order for every field: built-in default < ``scix.toml`` (or the
file named by ``SCIX_CONFIG``) < environment variable < per-call override
(:func:`Config.replace`). Section and field names are the ones papermill
parameters map onto, e.g. ``embedding.model`` or ``vectors.backend``.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scix_core.errors import ConfigError
from scix_core.paths import Found, config_file, default_data_dir, default_home, origins


@dataclass(frozen=True)
class EmbeddingConfig:
    """``model`` is a sentence-transformers name or path; ``bundled-minilm`` is the offline default."""

    model: str = "bundled-minilm"
    batch_size: int = 64
    max_length: int = 512
    query_cache_size: int = 128
    device: str = "cpu"
    # "auto": for the bundled model the backend `scix evidence backends` chose on this kind of CPU
    # (openvino-int8 where it has int8 dot-product instructions, VNNI or AMX: 3.76x torch's docs/s; onnx-int8
    # on AVX2 alone: 1.7x), torch for any other model (no evidence for it); or "torch", "onnx" (float32),
    # "onnx-int8", "openvino" (float32 weights, bf16 arithmetic where the CPU has it), "openvino-int8"
    backend: str = "auto"


@dataclass(frozen=True)
class VectorConfig:
    """``backend``: ``edge`` (embedded qdrant-edge, default) or ``qdrant`` (qdrant-client)."""

    backend: str = "edge"
    url: str | None = None
    hnsw_m: int = 16
    hnsw_ef_construct: int = 100
    timeout_s: float = 10.0
    # a process that finds a finished build's embedded shard held by another (a second `scix serve` worker)
    # reads a private copy of it (scix_core.vectors.replica); false: its dense lane is dropped instead
    replicas: bool = True


@dataclass(frozen=True)
class PostgresConfig:
    dsn: str | None = None
    connect_timeout_s: int = 5
    # title/abstract ranking: "bm25" (the build's term matrix mirrored into PostgreSQL, Lucene BM25 in SQL:
    # the default bm25 backend's scores) or "ts_rank_cd" (PostgreSQL's own full-text match and ranking)
    ranking: str = "bm25"
    # user state on PostgreSQL (SCIX_STATE_DSN; `scix users migrate --to postgres` copies a SQLite state
    # over); None: the workspace's SQLite file
    state_dsn: str | None = None


@dataclass(frozen=True)
class SearchConfig:
    """Search defaults (docs/design.md#search). The per-call lexical knobs ``SCIX_LEXICAL_POOL``,
    ``SCIX_LEXICAL_RANK_FLAG`` and ``SCIX_QDRANT_EXACT`` are environment variables
    re-read on every query (:mod:`scix_core.search.knobs`), as in the reference design.
    """

    # the build's term matrix, Lucene BM25 (same quality, 5-10x FTS5's speed); "sqlite" (FTS5 bm25());
    # "postgres"
    lexical_backend: str = "bm25"
    # AND, and OR when AND fills fewer than the lane depth (the gate chose it); "and"; "or"
    lexical_mode: str = "auto"
    depth: int = 60  # per-lane candidates fed to fusion
    rrf_k: int = 60
    # "rrf" or "convex" (min-max normalised scores, dense weighs convex_alpha; scix_core.search.fusion)
    fusion: str = "rrf"
    convex_alpha: float = 0.5
    limit: int = 10
    title_weight: float = 1.0  # FTS5 bm25() column weights
    abstract_weight: float = 1.0
    bm25_k1: float = 1.2  # the "bm25" backend's BM25 parameters, applied at query time
    bm25_b: float = 0.75
    ts_config: str = "english"  # PostgreSQL text-search config, from a whitelist
    lane_timeout_ms: int = 5000
    max_query_chars: int = 2000
    max_query_tokens: int = 64
    body: bool = True  # run the body lane when the index has full texts
    # the dense lane scores a paper by its best passage too, when the index has passage vectors (scix ingest
    # --passages)
    passages: bool = True
    # post-fusion stages (docs/design.md#rewrite to #boosts); each switchable per call
    rerank: str = "off"  # "off", a CrossEncoder path, or a reranker name trained into the workspace
    rerank_window: int = 50
    rerank_max_length: int = 512  # tokens per (query, title + abstract) pair: the window's cost grows with it
    rerank_backend: str = "torch"  # "onnx" or "onnx-int8": the cross-encoder on ONNX Runtime
    boosts: bool = False  # off until they clear the evaluation gate (scix eval --baseline hybrid)
    rewrite: str = "off"  # "off", "local" (alias table) or the URL of an OpenAI-compatible server
    rewrite_model: str = "default"
    rewrite_timeout_s: float = 5.0
    alias_file: str = ""  # extra alias table (alias<TAB>canonical), merged over the shipped one
    # optional lanes and policies (docs/design.md#search-lanes, item 4, and #guards), off by default
    lanes: str = ""  # comma list of: alias, fielded, sparse
    broad_query_guard: bool = False
    community_max: int = 50_000


@dataclass(frozen=True)
class RecommendConfig:
    """Recommendation defaults (docs/design.md#recommend; constants from the reference design "Phase 8").

    Tier thresholds are counts of distinct saved papers. Half-lives of the
    EWMA profiles are counted in saves (a save is one update). Windows of
    the trending tier are months measured back from the newest paper of the
    index; the suppression window is days measured back from the user's
    newest interaction — never the wall clock.
    """

    tier1_min_saves: int = 5  # MIN_PAPERS_FOR_CLUSTERING
    tier2_min_saves: int = 3
    tier3_min_saves: int = 1
    limit: int = 10  # top_k of MMR
    # Tier 0
    trending_months: tuple[int, ...] = (24, 48, 96)  # TRENDING_RECENCY_MONTHS, widened for thin categories
    trending_min_papers: int = 0  # a window is "thin" below max(this, limit); 0 = limit
    # Tier 2 (EWMA profiles)
    longterm_half_life: float = 20.0
    shortterm_half_life: float = 3.0
    # "corrected": every save weighted α(1 − α)^age, the weights summed to 1 (Kingma & Ba 2015's bias
    # correction); "first": the first save starts the average, so it keeps (1 − α)^(n − 1) of it — at three
    # saves 93% of the long-term profile. Corrected raised Tier 2's recall at three saves on both tuning
    # samples at the same diversification (docs/results.md)
    ewma_start: str = "corrected"
    # Tier 1
    max_clusters: int = 8
    min_silhouette: float = 0.05  # below this at every k >= 2 the library is one interest
    # a user's stored number of clusters is kept while its silhouette is within this of the best cut's (one
    # more save moved a real library's flat silhouettes by less; recommend/stages/cluster.py)
    cluster_k_tolerance: float = 0.005
    match_min_similarity: float = 0.5  # Hungarian pairs less similar than this get a new cluster id
    recency_half_life_saves: float = 20.0  # cluster importance: how fast old saves fade
    total_slots: int = 100
    min_slots: int = 3
    oversample: int = 3  # per-cluster kNN limit = quota x oversample
    shortterm_supplement: int = 20  # _ST_SUPPLEMENT
    # papers other users saved alongside, added to the candidates (0: content only)
    cosave_candidates: int = 50
    # a list longer than `limit` (a second page; an evaluation at fifty) with tail_reach on: this many
    # co-saved papers per slot of the list when more — those past cosave_candidates only for reach picks
    cosave_per_slot: float = 8.0
    # Tiers 3 and 2 add co-saved papers when the index has other users (False: the reference design)
    community_tiers: bool = True
    # MMR λ over the blended Tier 3 pool (1.0: the best scores as they are; tier2_mmr_lambda in Tier 2): 0.7
    # in Tier 3 and 0.85 in Tier 2 were chosen on the CiteULike-a tuning samples with the iALS co-save part
    # (tier_collab) — at one save 0.7 covered more of the user's later interests at the same recall; at three
    # 0.7 cost recall, and 0.85 with a wider neighbour cover (tier2_neighbour_cover 1.5) gained on both
    tier_mmr_lambda: float = 0.7
    tier2_mmr_lambda: float = 0.85
    # + this to the MMR gain of a candidate of a Tier 3 pool cluster below its slot share (0: plain MMR); 0.1
    # covered more of the user's later interests at the same recall on the CiteULike-a tuning samples; in
    # Tier 2 (tier2_quota_bonus) it cost recall there, where the neighbour cover already spreads the list
    tier3_quota_bonus: float = 0.1
    tier2_quota_bonus: float = 0.0
    # + this × the weight of the interests of the users who saved the same papers (their libraries' Ward
    # clusters) that a candidate reaches first, in the MMR of Tier 3 / Tier 2 (0: off; when on, it takes
    # the place of the pool clusters' quota bonus); recommend/interests.py, chosen on CiteULike-a samples;
    # Tier 3's 2.0 with the per-index co-save weights (iALS-heavy at one save: less spread) won back the
    # coverage those cost, at the same recall (docs/results.md); Tier 2's 3.0 with its co-save weight 1.25:
    # on both three-save tuning samples more of the user's later interests covered than 1.75 with 2.0 at
    # about the same recall@10, and more recall@50 in a list of fifty
    tier3_neighbour_cover: float = 2.0
    tier2_neighbour_cover: float = 3.0
    tier1_neighbour_cover: float = 1.0  # the same in Tier 1's MMR, beside its own clusters' quota bonus
    neighbours: int = 100  # at most this many of those users, the most papers shared first
    community_weight: float = 1.0  # Tier 3: weight_cosine · similarity + this · co-save score
    # Tier 2's weight (three or four saves): a heavier weight covers more of the user's later interests for
    # recall, a wider neighbour cover the same at a lower price: 1.25 with tier2_neighbour_cover 3.0 (was 2.0
    # with 1.75) chosen on the CiteULike-a tuning samples (docs/results.md); at one save 2.0 cost more recall
    # than it was worth
    tier2_community_weight: float = 1.25
    # the co-save score: "rp3beta" (graph walk, collab_alpha/beta), "ease" (EASE^R, collab_ease_lambda),
    # "cosine" (item-kNN), or several joined by "+" (each normalised per user, then summed)
    collab: str = "rp3beta+ease"
    # the co-save score of Tiers 3 and 2 ("": as collab); the community fits the parts of both once. iALS
    # beside RP3beta + EASE raised recall at three saves on both CiteULike-a tuning samples and, with Tier 3's
    # MMR λ 0.7, covered more of the user's later interests at one save at the same recall; in Tier 1 it
    # helped one sample and cost the other (docs/results.md)
    tier_collab: str = "rp3beta+ease+ials"
    # "validated": each co-save part's weight chosen per index on a validation split of the community's saves
    # — Tiers 3 and 2 over tier_collab's parts at one and at three saves, Tier 1 over every part with whole
    # libraries — taken only where it beats the configured weights significantly (recommend/collab/weights.py,
    # docs/results.md); "equal": tier_collab's parts 1 each, Tier 1 collab's parts 1 each
    tier_weights: str = "validated"
    # the list length whose recall that choice compares. Not `scix eval-recs`' first cutoff: at ten training
    # saves a user, the choice by recall@50 took iALS alone for Tier 1 where recall@10's took EASE ½ + iALS,
    # and the cascade's recall@50 fell by 0.0045 on CiteULike-a (docs/results.md)
    tier_weights_at: int = 10
    collab_alpha: float = 0.8
    collab_beta: float = 0.4
    collab_ease_lambda: float = 50.0
    weight_longterm: float = 0.40
    weight_shortterm: float = 0.25
    weight_cosine: float = 0.65
    # + this · co-save score in the heuristic (0: the reference design's formula exactly)
    weight_cosave: float = 0.7
    scorer: str = "heuristic"  # or "lightgbm"
    # "cosine": 0.65·cosine to the query that found it; "profile": 0.40·long + 0.25·short
    heuristic: str = "cosine"
    # (the reference design: scix_core/data/reference.toml); the gate shipped cosine over profile on
    # CiteULike-a
    scorer_model: str = "default"  # models/scorers/NAME in the workspace, or a path to a LightGBM model file
    suppress_dismissals: int = 3
    suppress_days: float = 14.0
    # the reference design's 0.6 with mmr_quota_bonus 0 (scix_core/data/reference.toml)
    mmr_lambda: float = 0.8
    # + this to the MMR gain of a candidate whose cluster is below its slot share
    mmr_quota_bonus: float = 0.1
    # "deficit": the bonus in proportion to the share of a cluster's slots still missing (chosen on the
    # CiteULike-a tuning sample: coverage up at the same recall, docs/results.md); "step": all of it while
    # the cluster is below its share
    mmr_quota_shape: str = "deficit"
    # Past the first `limit` picks every n-th is a reach pick, at λ mmr_tail_lambda, that may take the
    # co-saved papers past cosave_candidates too (False: no reach, one λ throughout); n is mmr_tail_every in
    # Tier 1, tier_tail_every in Tier 3, tier2_tail_every in Tier 2. The other picks, and so the first
    # `limit`, are the list without it. Chosen on the CiteULike-a tuning samples at ten training saves and
    # fifty items: at one, three and five saves the coverage of EASE with the recall of iALS (docs/results.md)
    tail_reach: bool = True
    mmr_tail_lambda: float = 0.0
    mmr_tail_every: int = 12
    tier_tail_every: int = 12
    tier2_tail_every: int = 15
    n_explore: int = 2
    explore_pool: int = 200
    log: bool = True  # log every recommendation served (the LightGBM scorer's training data)
    # how stale the *other* users' saves in the co-save model may be, seconds (the asking user's own saves
    # always count at once): None is 0 — every call sees every save — except under `scix serve`, where it is
    # SERVE_COMMUNITY_REFRESH_S (many users save; refitting per request would be the server's main cost)
    community_refresh_s: float | None = None
    # the co-save model's slow parts (EASE, iALS) are refitted once their fit is this many seconds old and the
    # saves have grown by this share since it: in a background thread under `scix serve` and in the notebooks,
    # in a detached process from the command line (`scix users refit` on demand). Until then the last fit
    # scores; a user's own saves count at once, and recording one never fits (recommend/refit.py)
    community_refit_age_s: float = 600.0
    community_refit_growth: float = 0.01
    # a user's last list answers their next request within this many seconds when nothing it depends on
    # changed (their interactions, the community's model): None is 0 — every call recomputes — except
    # under `scix serve`, where it is SERVE_REUSE_S (recommend/reuse.py)
    reuse_s: float | None = None


@dataclass(frozen=True)
class Config:
    # the checkout's .scix/ and data/, or the user data directory's for an installed package (scix_core.paths)
    home: Path = field(default_factory=default_home)
    data_dir: Path = field(default_factory=default_data_dir)
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    vectors: VectorConfig = field(default_factory=VectorConfig)
    postgres: PostgresConfig = field(default_factory=PostgresConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    recommend: RecommendConfig = field(default_factory=RecommendConfig)

    def replace(self, **overrides: Any) -> Config:
        """Per-call overrides with dotted names: ``cfg.replace(**{"embedding.model": "x"})``."""
        return _apply(self, overrides)


_ENV = {
    "SCIX_HOME": "home",
    "SCIX_DATA_DIR": "data_dir",
    "SCIX_EMBED_MODEL": "embedding.model",
    "SCIX_EMBED_BATCH": "embedding.batch_size",
    "SCIX_EMBED_BACKEND": "embedding.backend",
    "SCIX_VECTOR_BACKEND": "vectors.backend",
    "SCIX_QDRANT_URL": "vectors.url",
    "SCIX_PG_DSN": "postgres.dsn",
    "SCIX_STATE_DSN": "postgres.state_dsn",
    "SCIX_LEXICAL_BACKEND": "search.lexical_backend",
}


def _coerce(value: Any, current: Any, name: str) -> Any:
    if isinstance(current, Path) or name in ("home", "data_dir"):
        return Path(value).expanduser()
    if isinstance(current, tuple) and not isinstance(value, (list, tuple)):
        try:
            return tuple(int(v) for v in str(value).split(","))
        except ValueError:
            raise ConfigError(f"{name}: {value!r} is not a comma list of integers") from None
    if isinstance(current, tuple):
        return tuple(value)
    if isinstance(current, bool):
        text = str(value).strip().lower()
        if text not in ("1", "true", "yes", "on", "0", "false", "no", "off"):
            raise ConfigError(f"{name}: {value!r} is not a boolean (true/false, yes/no, on/off, 1/0)")
        return text in ("1", "true", "yes", "on")
    if isinstance(current, (int, float)) and not isinstance(value, (int, float)):
        try:
            return type(current)(value)
        except ValueError:
            raise ConfigError(f"{name}: {value!r} is not a {type(current).__name__}") from None
    if isinstance(current, int) and isinstance(value, float):  # 100.0 for an int field, from a script or TOML
        if not value.is_integer():
            raise ConfigError(f"{name}: {value!r} is not a whole number")
        return int(value)
    if isinstance(current, float) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _apply(cfg: Any, overrides: dict[str, Any]) -> Any:
    nested: dict[str, dict[str, Any]] = {}
    flat: dict[str, Any] = {}
    names = {f.name for f in dataclasses.fields(cfg)}
    for key, value in overrides.items():
        head, _, rest = key.partition(".")
        if head not in names:
            raise ConfigError(f"unknown config field {key!r}; valid: {', '.join(sorted(names))}")
        if rest:
            nested.setdefault(head, {})[rest] = value
        elif isinstance(value, dict):
            nested.setdefault(head, {}).update(value)
        else:
            flat[head] = _coerce(value, getattr(cfg, head), head)
    for head, sub in nested.items():
        flat[head] = _apply(getattr(cfg, head), sub)
    return dataclasses.replace(cfg, **flat)


def config_from_dict(values: dict[str, Any]) -> Config:
    """A configuration from :func:`dataclasses.asdict`'s form of one (paths as strings, tuples as lists):
    what a detached process is handed to run with its caller's settings exactly."""
    return _apply(Config(), values)


PRESETS = Path(__file__).parent / "data"  # named configs shipped with the package: ``--config reference``


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESETS.glob("*.toml") if p.stem != "sources")


def _config_file(path: Path | str | None) -> Found:
    """The file ``load_config(path)`` reads: ``path`` (or the preset it names), else the one
    :func:`scix_core.paths.config_file` finds."""
    if path is None:
        return config_file()
    if not Path(path).exists():
        if str(path) not in preset_names():
            raise ConfigError(
                f"config file {str(path)!r} does not exist (presets: {', '.join(preset_names())})"
            )
        return Found(PRESETS / f"{path}.toml", f"the preset {path!r}")
    return Found(Path(path), "--config")


def _read(found: Found) -> dict[str, Any]:
    if found.path is None or not found.path.exists():
        return {}
    try:
        return tomllib.loads(found.path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{found.path}: {exc}") from exc


def load_config(path: Path | str | None = None, **overrides: Any) -> Config:
    """Defaults, then the TOML file, then ``SCIX_*`` variables, then ``overrides``.

    ``path`` may also name a preset shipped in ``scix_core/data`` (``"reference"``: the reference design's
    recommender); an explicit path that does not exist is an error, not the defaults. Without it the file is
    the one :func:`scix_core.paths.config_file` finds (``SCIX_CONFIG``, the working directory, ...).
    """
    cfg = _apply(Config(), _read(_config_file(path)))
    env = {dotted: os.environ[var] for var, dotted in _ENV.items() if os.environ.get(var)}
    return _apply(_apply(cfg, env), overrides)


def path_origins(path: Path | str | None = None, **overrides: Any) -> dict[str, Found]:
    """Where the config file, the workspace, the data directory, the reports and the notebooks are, and
    why there (``scix info``)."""
    cfg = load_config(path, **overrides)
    found = _config_file(path)
    set_by_file = {key for key in ("home", "data_dir") if key in _read(found)}
    return origins(cfg.home, cfg.data_dir, found, set_by_file | {k for k in ("home", "data_dir") if k in overrides})
