"""Collaborative and text item scorers over the index's save matrix: the peers of ``scix eval-recs`` and the
community signal of the tiers.

Every model is a small object with ``fit(matrix)`` (users × catalogue rows,
binary CSR) and ``scores(rows)``: the saved catalogue rows of one user →
one float32 score per catalogue row. The user's own rows are not zeroed
here; callers exclude what the user has seen. Hyper-parameters are plain
constructor fields; ``MODELS`` maps a name to its class, ``GRIDS`` to
the small grid ``scix eval-recs`` tunes on a validation split of the
training saves (``scix_core.evaluate.tuning``) and ``BEYOND`` to the values
it steps to when the best sits on the grid's edge.

* ``rp3beta`` — the graph walk item → user → item of Paudel et al. (2017),
  transition probabilities raised to α, the landing item's popularity
  divided out to the power β; computed as two sparse products per user, so
  the item–item matrix is never built and a new save counts at once.
* ``item-knn`` — item–item cosine with shrinkage (Sarwar et al. 2001;
  Dacrema et al. 2021's ItemKNNCF), each item's ``neighbours`` best kept.
* ``ease`` — EASE^R (Steck 2019): a closed-form dense item–item model; fits
  only where the dense Gram matrix fits (:func:`ease.check_fits`).
* ``ials`` — implicit's ALS (Hu, Koren & Volinsky 2008), the user's factors
  recomputed from their saves.
* ``text-knn`` — TF-IDF cosine over the item's text (title, abstract, bag
  of words or tag names, whatever the loader gave it).
* ``hybrid-knn`` — item–item cosine over the saves stacked beside weighted
  text features (Dacrema et al.'s CFCBF).
* ``svm`` — arxiv-sanity-lite's per-user linear SVM over TF-IDF unigrams and
  bigrams; ``cf-from-text`` — iALS factors predicted from the embedding for
  items nobody saved (:mod:`~scix_core.recommend.collab.content`). Both score
  papers without saves: the content-side peers of the cold-item protocol.

``COLD`` names the peers that can score an item nobody saved; the others
(``NEEDS_SAVES``) only rank items someone saved.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from scix_core.errors import UnknownNameError
from scix_core.recommend.collab.content import CfFromText, Svm
from scix_core.recommend.collab.ease import Ease
from scix_core.recommend.collab.ials import Ials
from scix_core.recommend.collab.knn import ItemKnn
from scix_core.recommend.collab.text import HybridKnn, TextKnn
from scix_core.recommend.collab.walk import RP3Beta


class ItemScorer(Protocol):
    name: str

    def fit(self, matrix) -> ItemScorer: ...

    def scores(self, rows: np.ndarray) -> np.ndarray: ...


MODELS = {
    "rp3beta": RP3Beta,
    "item-knn": ItemKnn,
    "ease": Ease,
    "ials": Ials,
    "text-knn": TextKnn,
    "hybrid-knn": HybridKnn,
    "svm": Svm,
    "cf-from-text": CfFromText,
}
TEXT_MODELS = (
    "text-knn",
    "hybrid-knn",
    "svm",
)  # built with the catalogue's texts: ``cls(texts=..., **params)``
VECTOR_MODELS = ("cf-from-text",)  # built with the index's vectors: ``cls(vectors=..., **params)``
COLD = ("text-knn", "hybrid-knn", "svm", "cf-from-text")  # score an item nobody saved (hybrid: its text side)
NEEDS_SAVES = tuple(m for m in MODELS if m not in COLD)

GRIDS: dict[str, list[dict]] = {
    "rp3beta": [{"alpha": a, "beta": b} for a in (0.6, 0.8, 1.0) for b in (0.0, 0.2, 0.4)],
    "item-knn": [{"shrink": s, "neighbours": n} for s in (0.0, 10.0, 50.0) for n in (200, 500, 1000)],
    # centred where CiteULike-a's validation splits chose (12.5 and 25); with more users than saved items each
    # λ is a dense inversion over every saved item (with fewer, every λ comes from one eigendecomposition:
    # collab/ease_dual.py), so a small grid; the steps past either edge go as far as before (BEYOND)
    "ease": [{"lam": lam} for lam in (12.5, 25.0, 50.0)],
    "ials": [
        {"factors": f, "alpha": a, "regularization": r}
        for f in (128, 256)
        for a in (20.0, 60.0)
        for r in (0.1, 1.0)
    ],
    "text-knn": [{"sublinear": s, "min_df": d} for s in (True, False) for d in (1, 2)],
    "hybrid-knn": [{"text_weight": w} for w in (0.1, 0.3, 1.0, 3.0)],
    # arxiv-sanity-lite's C is 0.01
    "svm": [{"C": c} for c in (0.01, 0.1, 1.0)],
    "cf-from-text": [{"factors": f, "ridge": r} for f in (64, 128) for r in (1.0, 10.0, 100.0)],
}


# Values tried past a grid's edge (axis -> (below the grid, above it), nearest first) when the validation best
# sits on that edge (``scix_core.evaluate.tuning.steps_beyond``): CiteULike-a's EASE chose the grid's
# smallest λ and iALS its largest factors, α and regularisation before these existed.
BEYOND: dict[str, dict[str, tuple[tuple, tuple]]] = {
    "rp3beta": {"alpha": ((0.4, 0.2, 0.1), (1.2, 1.5)), "beta": ((), (0.6, 0.8))},
    "item-knn": {"shrink": ((), (100.0, 200.0, 500.0)), "neighbours": ((100, 50), (2000, 4000))},
    "ease": {"lam": ((6.25, 3.125), (100.0, 200.0, 400.0, 800.0, 1600.0, 3200.0))},
    "ials": {
        "factors": ((64,), (512,)),
        "alpha": ((10.0, 5.0), (120.0, 240.0)),
        "regularization": ((0.03, 0.01), (3.0, 10.0)),
    },
    "text-knn": {"min_df": ((), (3, 5))},
    "hybrid-knn": {"text_weight": ((0.03, 0.01), (10.0,))},
    "svm": {"C": ((0.001,), (10.0,))},
    "cf-from-text": {"ridge": ((0.1,), (1000.0,)), "factors": ((32,), (256,))},
}


def make(name: str, texts=None, vectors=None, **params) -> ItemScorer:
    """A model by name; an unknown name lists the valid ones."""
    if name not in MODELS:
        raise UnknownNameError("item scorer", name, tuple(MODELS))
    if name in TEXT_MODELS:
        return MODELS[name](texts=texts, **params)
    if name in VECTOR_MODELS:
        return MODELS[name](vectors=vectors, **params)
    return MODELS[name](**params)
