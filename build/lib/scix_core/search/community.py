"""Citation community expansion (docs/design.md#guards): seed papers -> their citation community.

The index's citation links (CACM's ``.X`` links, CiteULike's, any loader's)
form an undirected graph weighted by how many links join two papers;
Louvain modularity (networkx, fixed seed) splits it into communities. A
request returns the union of the seeds' communities instead of fusing
lanes, ranked by personalised PageRank from the seeds (so papers closest to
the seeds come first), seeds themselves excluded. A community larger than
``max_size`` (50,000 by default) is refused with ``seed_too_broad``.
"""

from __future__ import annotations

import threading
from functools import cached_property

from scix_core.errors import QueryError
from scix_core.stores.papers import PaperStore
from scix_core.types import Ranking

MAX_COMMUNITY = 50_000


class SeedTooBroadError(QueryError):
    code = "seed_too_broad"


class CitationCommunities:
    def __init__(self, store: PaperStore, kinds: tuple[str, ...] = ("direct",), seed: int = 13):
        self.store, self.kinds, self.seed = store, kinds, seed
        self._lock = threading.Lock()

    @cached_property
    def graph(self):
        import networkx as nx

        graph = nx.Graph()
        marks = ",".join("?" * len(self.kinds))
        rows = self.store.conn.execute(
            f"SELECT source, target FROM citations WHERE kind IN ({marks})", self.kinds
        )
        for source, target in rows:
            if source != target:
                weight = graph.get_edge_data(source, target, {"weight": 0})["weight"]
                graph.add_edge(source, target, weight=weight + 1)
        return graph

    @cached_property
    def membership(self) -> dict[str, int]:
        from networkx.algorithms.community import louvain_communities

        with self._lock:
            parts = (
                louvain_communities(self.graph, weight="weight", seed=self.seed) if len(self.graph) else []
            )
        return {node: i for i, part in enumerate(parts) for node in part}

    def expand(self, seeds: list[str], k: int, max_size: int = MAX_COMMUNITY) -> tuple[Ranking, dict]:
        import networkx as nx

        if not seeds:
            raise QueryError("community expansion needs at least one seed paper id")
        known = self.store.get(seeds)
        unknown = [s for s in seeds if s not in known]
        if unknown:
            raise QueryError(f"unknown seed paper id(s): {', '.join(unknown)}")
        if not len(self.graph):
            raise QueryError(
                "this index has no citation links: load a corpus with a citation graph (e.g. CACM)"
            )
        ids = {self.membership[s] for s in seeds if s in self.membership}
        members = {n for n, c in self.membership.items() if c in ids}
        info = {
            "seeds": list(seeds),
            "communities": sorted(ids),
            "community_size": len(members),
            "seeds_without_links": [s for s in seeds if s not in self.membership],
        }
        if len(members) > max_size:
            raise SeedTooBroadError(
                f"the seeds' community has {len(members):,} papers (> {max_size:,}): "
                "pick more specific seeds or add filters"
            )
        sub = self.graph.subgraph(members)
        start = {s: 1.0 for s in seeds if s in members}
        scores = nx.pagerank(sub, personalization=start, weight="weight") if start else {}
        ordered = sorted((p for p in scores if p not in seeds), key=lambda p: (-scores[p], p))
        return Ranking.from_pairs("community", ((p, scores[p]) for p in ordered[:k])), info
