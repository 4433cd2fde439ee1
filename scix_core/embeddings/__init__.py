"""Embeddings: the encoder and the on-disk corpus vector cache."""

from scix_core.embeddings.cache import EmbeddingCache, corpus_hash
from scix_core.embeddings.encoder import (
    BUNDLED,
    Encoder,
    index_embedding,
    model_slug,
    query_embedding,
    resolve_backend,
    shared_encoder,
)

__all__ = [
    "BUNDLED",
    "EmbeddingCache",
    "Encoder",
    "corpus_hash",
    "index_embedding",
    "query_embedding",
    "model_slug",
    "resolve_backend",
    "shared_encoder",
]
