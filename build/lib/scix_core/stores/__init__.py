"""Storage: the SQLite paper store with its FTS5 lexical indexes."""

from scix_core.stores.papers import PaperStore, build_store

__all__ = ["PaperStore", "build_store"]
