"""The collaborative and text item scorers on a 5 × 5 save matrix worked by hand (seconds, no data)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.sparse import csr_matrix, vstack

from scix_core.errors import ConfigError, UnknownNameError
from scix_core.recommend import collab
from scix_core.recommend.collab import ease_dual
from scix_core.recommend.collab.ease import Ease, check_fits
from scix_core.recommend.collab.ials import Ials
from scix_core.recommend.collab.knn import ItemKnn, top_per_row
from scix_core.recommend.collab.text import HybridKnn, TextKnn
from scix_core.recommend.collab.walk import RP3Beta
from scix_core.recommend.community import collab_model

# users × items: u0 {0,1}, u1 {0,1,2}, u2 {1,2}, u3 {3,4}, u4 {0,3}
# savers per item n = (3, 3, 2, 2, 1); saves per user = (2, 3, 2, 2, 2)
LIBS = [[0, 1], [0, 1, 2], [1, 2], [3, 4], [0, 3]]


def saves(libs: list[list[int]]) -> csr_matrix:
    """The binary users × 5 items matrix of ``libs``."""
    users = [u for u, ln in enumerate(libs) for _ in ln]
    return csr_matrix(
        (np.ones(len(users), np.float32), (users, [i for ln in libs for i in ln])), shape=(len(libs), 5)
    )


X = saves(LIBS)
TEXTS = ["dark matter halo", "dark matter", "protein folding", "matter of protein", "galaxy"]


def test_rp3beta_by_hand():
    # α = 1, β = 0 from item 0: (1/3) · Σ over its savers u0 (1/2), u1 (1/3), u4 (1/2) of their other saves
    s = RP3Beta(alpha=1.0, beta=0.0).fit(X).scores(np.array([0]))
    assert s[1] == pytest.approx((1 / 3) * (1 / 2 + 1 / 3))
    assert s[2] == pytest.approx((1 / 3) * (1 / 3))
    assert s[3] == pytest.approx((1 / 3) * (1 / 2))
    assert s[4] == 0.0
    # β = 0.5 divides each landing item by √n
    p = RP3Beta(alpha=1.0, beta=0.5).fit(X).scores(np.array([0]))
    assert p[1] == pytest.approx(s[1] / np.sqrt(3)) and p[3] == pytest.approx(s[3] / np.sqrt(2))


def test_rp3beta_scores_a_batch_of_queries_to_the_same_numbers():
    walk = RP3Beta().fit(X)
    queries = [np.array([0]), np.array([1, 3]), np.array([], dtype=np.int64), np.array([0, 2, 4])]
    for query, batched in zip(queries, walk.scores_many(queries)):
        assert np.array_equal(batched, walk.scores(query))  # the same sums, bit for bit
    assert [list(s) for s in walk.scores_many(queries[:1])] == [list(walk.scores(queries[0]))]


def test_cosine_walk_is_item_knn_without_shrinkage():
    # cos(0, 1) = co 2 / √(3·3); cos(0, 2) = 1 / √(3·2); cos(0, 3) = 1 / √(3·2)
    s = collab_model("cosine").fit(X).scores(np.array([0]))
    assert (
        s[1] == pytest.approx(2 / 3)
        and s[2] == pytest.approx(1 / np.sqrt(6))
        and s[3] == pytest.approx(1 / np.sqrt(6))
    )
    with pytest.raises(UnknownNameError, match="rp3beta"):
        collab_model("svd")


def test_item_knn_shrinks_and_keeps_each_items_best_neighbours():
    # shrink 1: sim(0,1) = 2 / (3 + 1); sim(0,2) = sim(0,3) = 1 / (√6 + 1); 2 neighbours: the tie keeps item 2
    s = ItemKnn(shrink=1.0, neighbours=2).fit(X).scores(np.array([0]))
    assert s[1] == pytest.approx(0.5) and s[2] == pytest.approx(1 / (np.sqrt(6) + 1)) and s[3] == 0.0
    kept = top_per_row(csr_matrix(np.array([[0, 3, 1, 3], [2, 0, 0, 0]], dtype=np.float32)), 2).toarray()
    assert kept.tolist() == [[0, 3, 0, 3], [2, 0, 0, 0]]


def test_ease_matches_the_closed_form():
    lam = 2.0
    g = (X.T @ X).toarray().astype(np.float64) + lam * np.eye(5)
    p = np.linalg.inv(g)
    b = -p / np.diag(p)[None, :]
    np.fill_diagonal(b, 0.0)
    got = Ease(lam=lam).fit(X).scores(np.array([0, 3]))
    np.testing.assert_allclose(got, b[[0, 3]].sum(axis=0), rtol=1e-4, atol=1e-6)


def test_ease_spans_only_saved_items():
    # an item nobody saved changes nothing (its B row and column are zero): the same with a sixth, empty one
    wide = csr_matrix((X.data, X.indices, X.indptr), shape=(5, 6))
    got = Ease(lam=2.0).fit(wide)
    assert got._p.shape == (5, 5)
    np.testing.assert_allclose(
        got.scores(np.array([0, 3, 5]))[:5],
        Ease(lam=2.0).fit(X).scores(np.array([0, 3])),
        rtol=1e-5,
        atol=1e-6,
    )


def test_ease_from_the_users_side_equals_the_closed_form_at_every_lambda():
    # 5 users with a save (and one without) over 8 items, one of them nobody's: the users' side is cheaper
    libs = [[0, 1, 5], [0, 1, 2], [1, 2], [3, 4], [3, 4, 6], []]
    wide = csr_matrix(
        (
            np.ones(13, np.float32),
            ([u for u, ln in enumerate(libs) for _ in ln], [i for ln in libs for i in ln]),
        ),
        shape=(6, 8),
    )
    assert ease_dual.worth_it(wide) and not ease_dual.worth_it(X)  # 5 users, 5 items: the item side
    spectrum = ease_dual.EaseSpectrum.of(wide)
    assert spectrum.t.shape == (7, 5) and list(spectrum.items) == [0, 1, 2, 3, 4, 5, 6]
    for lam in (0.5, 2.0, 50.0):
        g = (wide.T @ wide).toarray().astype(np.float64)[:7, :7] + lam * np.eye(7)
        p = np.linalg.inv(g)
        b = -p / np.diag(p)[None, :]
        np.fill_diagonal(b, 0.0)
        fit = spectrum.at(lam)
        fit.prime([np.array([0, 3]), np.array([2])])
        for rows in ([0, 3], [2], [1, 5, 7]):  # item 7: nobody's, scores nothing and gets nothing
            got = fit.scores(np.array(rows))
            want = np.append(b[[r for r in rows if r < 7]].sum(axis=0), 0.0)
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(
            fit.scores(np.array([2])), Ease(lam=lam).fit(wide).scores(np.array([2])), atol=1e-5
        )
        assert len(fit._primed) == 2 and not fit.scores(np.array([7])).any()
    # two communities with no user in common, users and items interleaved: from an item of one, every item of
    # the other scores exactly 0 (rounding left ~1e-16 there: half the catalogue ranked on noise)
    from scipy.sparse import block_diag
    from scipy.sparse import random as sparse_random

    parts = [sparse_random(20, 40, density=0.15, random_state=seed, format="csr") for seed in (1, 2)]
    two = block_diag(parts).tocsr()
    two.data[:] = 1.0
    rng = np.random.default_rng(0)
    users, items = rng.permutation(40), rng.permutation(80)
    got = ease_dual.EaseSpectrum.of(two[users][:, items]).at(2.0).scores(np.array([int(np.argmin(items))]))
    assert np.count_nonzero(got[items >= 40]) == 0 and np.count_nonzero(got[items < 40]) > 20


def test_ease_fits_p_from_the_users_side_when_they_are_fewer():
    # 3 users over 6 saved items: P itself (not only the scale-free scores: a Woodbury update uses it) is
    # (XᵀX + λI)⁻¹, however many items; the item side (5 users, 5 items) gives the same numbers
    libs = [[0, 1, 5], [1, 2, 4], [3, 4]]
    users = [u for u, ln in enumerate(libs) for _ in ln]
    few = csr_matrix((np.ones(8, np.float32), (users, [i for ln in libs for i in ln])), shape=(3, 6))
    for matrix in (few, X):
        for lam in (0.5, 25.0):
            gram = (matrix.T @ matrix).toarray().astype(np.float64)
            want = np.linalg.inv(gram + lam * np.eye(matrix.shape[1]))
            got = Ease(lam=lam).fit(matrix)._p
            assert got.flags.f_contiguous and got.dtype == np.float32
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # two communities with no user in common, users and items interleaved: P is exactly 0 between them
    from scipy.sparse import block_diag
    from scipy.sparse import random as sparse_random

    parts = [sparse_random(20, 40, density=0.15, random_state=seed, format="csr") for seed in (1, 2)]
    two = block_diag(parts).tocsr()
    two.data[:] = 1.0
    rng = np.random.default_rng(0)
    order = rng.permutation(80)
    fit = Ease(lam=2.0).fit(two[rng.permutation(40)][:, order])
    side = order[fit._items] < 40
    assert not np.asarray(fit._p)[np.ix_(side, ~side)].any() and np.asarray(fit._p)[np.ix_(side, side)].all()


def test_ease_fits_are_cached_on_disk_and_memory_mapped_back(tmp_path, monkeypatch):
    from scix_core.recommend.collab import ease

    rows = np.array([0, 3])
    first = Ease(lam=2.0, cache_dir=tmp_path).fit(X)
    (path,) = tmp_path.glob("ease-*.npy")
    again = Ease(lam=2.0, cache_dir=tmp_path).fit(X)
    assert isinstance(again._p, np.memmap) and list(tmp_path.glob("ease-*.npy")) == [path]
    np.testing.assert_allclose(again.scores(rows), first.scores(rows), rtol=1e-6)
    # the same libraries in another user order (another process's arrival order) are the same fit
    reordered = Ease(lam=2.0, cache_dir=tmp_path).fit(X[::-1])
    assert isinstance(reordered._p, np.memmap) and list(tmp_path.glob("ease-*.npy")) == [path]
    # another λ or other saves are another fit; only the newest KEEP stay
    monkeypatch.setattr(ease, "KEEP", 2)
    Ease(lam=3.0, cache_dir=tmp_path).fit(X)
    Ease(lam=2.0, cache_dir=tmp_path).fit(X[:4])
    assert len(list(tmp_path.glob("ease-*.npy"))) == 2 and not path.exists()


def test_a_stale_start_loads_the_newest_fit_of_the_same_lambda_and_says_so(tmp_path):
    rows = np.array([0, 3])
    first = Ease(lam=2.0, cache_dir=tmp_path).fit(X[:4])
    assert first.fit_seconds is not None and first.fitted_saves is None  # fitted here, on these saves
    Ease(lam=5.0, cache_dir=tmp_path).fit(X[:3])  # newer, but another λ: never taken
    stale = Ease(lam=2.0, cache_dir=tmp_path, stale_share=0.0).fit(X)  # more saves, not cached
    assert stale.fitted_saves == X[:4].nnz and stale.fit_seconds == pytest.approx(first.fit_seconds)
    np.testing.assert_allclose(stale.scores(rows), first.scores(rows), rtol=1e-6)
    assert len(list(tmp_path.glob("ease-*.npy"))) == 2  # nothing fitted
    fresh = Ease(lam=2.0, cache_dir=tmp_path).fit(X)  # without stale_share: a real fit of these saves
    assert fresh.fitted_saves is None and not np.allclose(fresh.scores(rows), first.scores(rows))
    # with nothing cached for its λ a stale start fits
    assert Ease(lam=9.0, cache_dir=tmp_path, stale_share=0.0).fit(X).fitted_saves is None
    # a background refit adopts the newest fit when it saw nearly as many saves (another worker's), else fits
    more = vstack([X, csr_matrix(np.array([[1.0, 0, 0, 0, 1]]))]).tocsr()  # one more user, not cached
    near = Ease(lam=2.0, cache_dir=tmp_path, stale_share=X.nnz / more.nnz).fit(more)
    assert near.fitted_saves == X.nnz  # the fit of X (the newest of λ 2) adopted
    far = Ease(lam=2.0, cache_dir=tmp_path, stale_share=1.0).fit(more)
    assert far.fitted_saves is None and far.fit_seconds is not None  # fitted (and cached) here


def test_ease_with_rows_changed_equals_a_refit():
    # u1 {0, 1, 2} truncated to {0}, u3 {3, 4} to {3}: the Woodbury update of the full fit = a refit
    libs = [[0, 1], [0], [1, 2], [3], [0, 3]]
    x_t = saves(libs)
    full = Ease(lam=2.0).fit(X)
    changed = full.with_rows_changed(
        [(np.array([0, 1, 2]), np.array([0])), (np.array([3, 4]), np.array([3]))]
    )
    refit = Ease(lam=2.0).fit(x_t[:, :4])  # item 4 is nobody's now: the same model over items 0-3
    for rows in ([0], [1, 3], [2]):
        np.testing.assert_allclose(
            changed.scores(np.array(rows))[:4], refit.scores(np.array(rows)), rtol=1e-4, atol=1e-5
        )
    # no second n × n array: the full fit's P with a rank-4 correction
    assert changed._p is full._p and changed._w.shape == (5, 4) and changed._v.shape == (4, 5)
    # scored ahead in one batch (the per-tier tables' users): the same scores; a plain fit primes nothing
    primed = full.with_rows_changed([(np.array([0, 1, 2]), np.array([0])), (np.array([3, 4]), np.array([3]))])
    primed.prime([np.array(rows) for rows in ([0], [1, 3], [3, 1])])
    assert len(primed._primed) == 2 and not hasattr(changed, "_primed")
    for rows in ([0], [1, 3], [2]):
        np.testing.assert_allclose(primed.scores(np.array(rows)), changed.scores(np.array(rows)), rtol=1e-6)
    full.prime([np.array([0])])
    assert not hasattr(full, "_primed")
    twice = changed.with_rows_changed([(np.array([0, 1]), np.array([1]))])  # u0 {0, 1} truncated to {1}
    again = Ease(lam=2.0).fit(saves([[1], *libs[1:]])[:, :4])
    for rows in ([0], [1, 3], [2]):
        np.testing.assert_allclose(
            twice.scores(np.array(rows))[:4], again.scores(np.array(rows)), rtol=1e-4, atol=1e-5
        )
    assert twice._w.shape == (5, 6) and full.with_rows_changed([(np.array([0]), np.array([0]))]) is full
    assert full.with_rows_changed([(np.array([0]), np.array([0, 5]))]) is None  # item 5 was never fitted


def test_ease_refuses_a_catalogue_it_cannot_hold():
    assert check_fits(1000) == 1000 * 1000 * 8
    with pytest.raises(ConfigError, match="rp3beta or item-knn"):
        check_fits(50_000)  # over max_items
    with pytest.raises(ConfigError, match="GiB"):
        Ease(max_items=4).fit(X)


def test_ials_user_factors_solve_the_normal_equations():
    model = collab.make("ials", factors=4, alpha=5.0, regularization=0.1, iterations=5).fit(X)
    rows = np.array([0, 1])
    y = np.asarray(model._model.item_factors, dtype=np.float64)
    # (YᵀY + α Y_Sᵀ Y_S + λI) u = (1 + α) Σ_S y — then the scores are Y u
    u = np.linalg.solve(y.T @ y + 5.0 * y[rows].T @ y[rows] + 0.1 * np.eye(4), 6.0 * y[rows].sum(axis=0))
    np.testing.assert_allclose(model.scores(rows), y @ u, rtol=1e-4, atol=1e-5)
    # implicit's own recalculate_user (a few conjugate-gradient steps) lands next to it
    theirs = model._model.recalculate_user(
        0, csr_matrix((np.ones(2, dtype=np.float32), ([0, 0], rows)), shape=(1, 5))
    )
    np.testing.assert_allclose(model.scores(rows), y @ np.asarray(theirs).ravel(), atol=0.02)


def test_text_knn_and_the_hybrid():
    s = TextKnn(texts=TEXTS).fit(X).scores(np.array([0]))
    assert (
        s[1] > s[3] > 0 and s[2] == 0.0 and s[4] == 0.0
    )  # "dark matter" > "matter of protein" > nothing shared
    # text weight 0: the hybrid is cosine over the saves alone
    np.testing.assert_allclose(
        HybridKnn(texts=TEXTS, text_weight=0.0).fit(X).scores(np.array([0]))[1:],
        collab_model("cosine").fit(X).scores(np.array([0]))[1:],
        rtol=1e-5,
        atol=1e-6,
    )
    with pytest.raises(ConfigError, match="texts"):
        TextKnn(texts=TEXTS[:2]).fit(X)
    with pytest.raises(ConfigError, match="empty"):
        TextKnn(texts=[""] * 5).fit(X)


# unit "embeddings" of the five items: 0 and 1 alike, 2 and 3 alike, 4 apart
VECS = np.array([[1, 0.1, 0], [1, 0, 0.1], [0, 1, 0.1], [0.1, 1, 0], [0, 0, 1]], dtype=np.float32)
VECS /= np.linalg.norm(VECS, axis=1, keepdims=True)


def test_the_svm_ranks_by_the_text_of_what_the_user_saved():
    from scix_core.recommend.collab.content import Svm

    texts = ["dark matter halo", "dark matter galaxy", "protein folding", "protein structure", "dark halo"]
    model = Svm(texts=texts, C=1.0, min_df=1).fit(X)
    s = model.scores(np.array([0, 1]))  # saved: the two dark-matter papers
    assert s[4] > s[2] and s[4] > s[3]  # "dark halo" is theirs; the protein papers are not
    assert model.signed and np.allclose(s, model.scores(np.array([1, 0])), atol=1e-5)  # seeded
    with pytest.raises(ConfigError, match="empty text"):
        Svm(texts=[""] * 5).fit(X)


def test_cf_from_text_predicts_the_factors_of_an_item_nobody_saved():
    from scix_core.recommend.collab.content import CfFromText

    # item 4 saved by nobody; its embedding is item 3's: it inherits item 3's place in the factor space
    libs = [[0, 1], [0, 1, 2], [1, 2], [3, 2], [0, 3]]
    vecs = VECS.copy()
    vecs[4] = vecs[3]
    model = CfFromText(vectors=vecs, factors=4, ridge=0.01).fit(saves(libs))
    y = model._fitted[0]
    assert y[4] @ y[3] / (np.linalg.norm(y[4]) * np.linalg.norm(y[3])) > 0.8
    s = model.scores(np.array([2, 3]))
    assert s[4] > s[0] and model.signed
    with pytest.raises(ConfigError, match="vectors"):
        CfFromText(vectors=vecs[:3]).fit(X)


@pytest.mark.parametrize("name", list(collab.MODELS))
def test_every_model_keeps_the_contract(name):
    """Fit once, score any saved set: one finite float32 per item, the same twice; unknown names listed."""
    model = collab.make(name, texts=TEXTS, vectors=VECS, **collab.GRIDS[name][0]).fit(X)
    a, b = model.scores(np.array([0, 3])), model.scores(np.array([0, 3]))
    assert a.shape == (5,) and a.dtype == np.float32 and np.isfinite(a).all()
    np.testing.assert_array_equal(a, b)
    assert model.scores(np.array([], dtype=np.int64)).shape == (5,)
    with pytest.raises(UnknownNameError, match="rp3beta"):
        collab.make("slim")


def test_an_ials_fit_is_kept_on_disk_and_loaded_for_the_same_saves(tmp_path, monkeypatch):
    first = Ials(factors=4, alpha=5.0, regularization=0.1, iterations=5, cache_dir=tmp_path).fit(X)
    assert first.fit_seconds > 0 and len(list(tmp_path.glob("ials-*.npy"))) == 1

    def refit(self, x):
        raise AssertionError("refitted the same saves")

    monkeypatch.setattr(Ials, "_solve", refit)
    again = Ials(factors=4, alpha=5.0, regularization=0.1, iterations=5, cache_dir=tmp_path).fit(X)
    rows = np.array([0, 1])
    np.testing.assert_array_equal(again.scores(rows), first.scores(rows))
    assert again.fit_seconds == first.fit_seconds  # the fit's own time: a loaded fit is no quicker to redo
    monkeypatch.undo()
    other = X.copy().tolil()
    other[0, 4] = 1.0  # other saves, another fit
    Ials(factors=4, alpha=5.0, regularization=0.1, iterations=5, cache_dir=tmp_path).fit(other.tocsr())
    assert len(list(tmp_path.glob("ials-*.npy"))) == 2


def test_a_server_ials_start_takes_the_newest_fit_of_the_same_parameters_and_says_which_saves(tmp_path):
    """As EASE's: a server's first fit over saves never fitted takes the newest cached fit of the same
    parameters and items that saw enough of them (its item factors score the users' saves as they are now),
    and says how many saves it saw; another parameter's fit is never taken; too few saves, a real fit."""
    small = X[:3]
    first = Ials(factors=4, alpha=5.0, regularization=0.1, iterations=5, cache_dir=tmp_path).fit(small)
    Ials(factors=3, alpha=5.0, regularization=0.1, iterations=5, cache_dir=tmp_path).fit(X)  # newer, other k
    stale = Ials(factors=4, alpha=5.0, regularization=0.1, iterations=5, cache_dir=tmp_path, stale_share=0.5)
    stale.fit(X)
    assert stale.fitted_saves == small.nnz and stale.fit_seconds == pytest.approx(first.fit_seconds)
    rows = np.array([0, 1])
    np.testing.assert_allclose(stale.scores(rows), first.scores(rows), rtol=1e-6)
    assert len(list(tmp_path.glob("ials-*.npy"))) == 2  # nothing fitted
    strict = Ials(factors=4, alpha=5.0, regularization=0.1, iterations=5, cache_dir=tmp_path, stale_share=1.0)
    assert strict.fit(X).fitted_saves is None and len(list(tmp_path.glob("ials-*.npy"))) == 3


def test_ease_with_rows_changed_leaves_no_tie_a_removed_user_made():
    # 300 users over items 0-59 but 10 and 20; one more user saved 10, 20, 60 and 61, their only saver.
    # Without that user the exact model scores 60 and 61 at 0, and 20 for a query of 10 (every item for a
    # query of 10 or 61); float32's residue of the cancelled terms sat exactly there, ranking those first
    rng = np.random.default_rng(3)
    libs = [sorted(rng.choice(np.r_[0:10, 11:20, 21:60], 6, replace=False).tolist()) for _ in range(300)]
    removed = [10, 20, 60, 61]

    def matrix(rows: list[list[int]]) -> csr_matrix:
        users = [u for u, ln in enumerate(rows) for _ in ln]
        cols = [i for ln in rows for i in ln]
        return csr_matrix((np.ones(len(cols), np.float32), (users, cols)), shape=(len(rows), 62))

    full = Ease(lam=5.0).fit(matrix([*libs, removed]))
    changed = full.with_rows_changed([(np.array(removed), np.array([], dtype=np.int64))])
    refit = Ease(lam=5.0).fit(matrix([*libs, []]))  # items 60 and 61 nobody's: scored 0
    for rows in ([10], [61], [10, 33]):
        got, want = changed.scores(np.array(rows)), refit.scores(np.array(rows))
        np.testing.assert_allclose(got[:60], want[:60], rtol=1e-3, atol=1e-6)
        assert (got[[60, 61]] == 0).all() and (rows != [10] or got[20] == 0)
    assert (changed.scores_many([np.array([61])])[0] == 0).all()  # one save only they had: no signal at all
