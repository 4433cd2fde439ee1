"""A hand-checkable corpus (12 papers, 8 queries, two citation communities): built into real indexes by
the ``built`` fixtures of ``tests/conftest.py``."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from scix_core.data import Dataset
from scix_core.types import CitationLink, Paper, Query

HUGE_BODY = "galaxy zyzzyva " * 75_000  # 1.1 MB: over the body lane's 1,048,575-character cap


def _p(pid, title, abstract, year, cats, authors=(), body=None):
    return Paper(
        pid, title, abstract, body, tuple(authors), tuple(cats), dt.date(year, 6, 1) if year else None, 0, ()
    )


PAPERS = (
    _p(
        "p01",
        "Graph neural networks for molecule property prediction",
        "We train graph neural networks on molecular graphs to predict solubility and toxicity.",
        2019,
        ["cs.LG", "q-bio.BM"],
        ["Ada Lovelace", "Alan Turing"],
        body="Message passing neural networks aggregate neighbour features. "
        "Transformers are compared as a baseline.",
    ),
    _p(
        "p02",
        "Convolutional neural networks for image classification",
        "Deep convolutional networks classify natural images; we study data augmentation.",
        2015,
        ["cs.CV"],
        ["Yann Lecun"],
    ),
    _p(
        "p03",
        "Dark matter halo mass function from cosmological simulations",
        "N-body simulations measure the halo mass function of dark matter across redshift.",
        2020,
        ["astro-ph.CO", "astro-ph.GA"],
        ["Vera Rubin"],
        body="We run simulations with a billion particles. Galaxy clusters trace the largest halos.",
    ),
    _p(
        "p04",
        "Galaxy rotation curves and the dark matter problem",
        "Flat rotation curves of spiral galaxies imply dark matter halos.",
        2018,
        ["astro-ph.GA"],
        ["Vera Rubin", "Kent Ford"],
    ),
    _p(
        "p05",
        "Vitamin D deficiency and bone health",
        "Low vitamin D levels are associated with osteoporosis and fractures in older adults.",
        2012,
        ["q-bio.TO"],
        ["Émile Durand"],
    ),
    _p(
        "p06",
        "Prime gaps and the Riemann zeta function",
        "We bound gaps between consecutive primes using zeros of the zeta function.",
        2021,
        ["math.NT"],
        ["Bernhard Riemann"],
    ),
    _p(
        "p07",
        "Transformers for protein structure prediction",
        "Attention-based neural networks predict protein structure from sequence.",
        2021,
        ["q-bio.BM", "cs.LG"],
        ["Ada Lovelace"],
        body="The transformer attends over residues; graph neural networks refine contacts.",
    ),
    _p(
        "p08",
        "Graph theory of social networks",
        "Degree distributions and clustering in social graphs follow power laws.",
        2017,
        ["cs.SI"],
        ["Alan Turing"],
    ),
    _p(
        "p09",
        "Neural network classification of galaxy morphology",
        "Convolutional neural networks label spiral and elliptical galaxies in survey images.",
        2022,
        ["astro-ph.GA", "cs.LG"],
        ["Vera Rubin", "Yann Lecun"],
    ),
    _p(
        "p10",
        "Running experiments on stemmed words",
        "Runners ran and were running; stemming maps these words together.",
        None,
        ["cs.IR"],
    ),
    _p(
        "p11",
        "Élan and naïve café diacritics in retrieval",
        "Accented words such as café and naïve should match their plain spellings.",
        2016,
        ["cs.IR"],
        ["Zoë Ångström"],
    ),
    _p(
        "p12",
        "Huge full text about galaxies",
        "A paper whose full text is too long for the body index.",
        2023,
        ["astro-ph.GA"],
        ["Vera Rubin"],
        body=HUGE_BODY,
    ),
)

QUERIES = (
    Query("q1", "dark matter halos in simulations"),
    Query("q2", "graph neural networks for molecules"),
    Query("q3", "primes and the zeta function"),
    Query("q4", "classifying galaxy images with deep learning"),
    Query("q5", "vitamin D and bone fractures"),
    Query("q6", "protein structure from sequence"),
)
QRELS = {
    "train": {
        "q1": {"p03": 2, "p04": 1},
        "q2": {"p01": 2},
        "q3": {"p06": 2},
        "q4": {"p09": 2, "p02": 1},
        "q5": {"p05": 2},
        "q6": {"p07": 2},
    }
}
#: two citation communities: astronomy (p03, p04, p09, p12) and learning (p01, p02, p07, p08);
#: p05 cites nothing
CITATIONS = tuple(
    CitationLink(a, b)
    for a, b in (
        ("p04", "p03"),
        ("p09", "p04"),
        ("p12", "p03"),
        ("p12", "p09"),
        ("p09", "p03"),
        ("p07", "p01"),
        ("p02", "p01"),
        ("p08", "p01"),
        ("p07", "p02"),
        ("p06", "p11"),
        ("p10", "p11"),
    )
)
CORPUS = Dataset("fixture", "python", PAPERS, QUERIES, QRELS, citations=CITATIONS)
BY_ID = {p.paper_id: p for p in PAPERS}


@dataclass(frozen=True)
class Built:
    """An index built from a corpus: the config that reaches it and its name."""

    config: object
    index: str
