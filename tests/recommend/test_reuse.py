"""Kept lists: the key, the age and the number of users."""

import time

from scix_core.recommend.result import Recommendations
from scix_core.recommend.reuse import ServedLists


def _list(user: str) -> Recommendations:
    return Recommendations("idx", user, 0, "trending", None, ())


def test_a_kept_list_answers_only_its_key_limit_and_age():
    kept = ServedLists(seconds=0.2)
    kept.put("a", 10, (3, 7, 1), _list("a"))
    assert kept.get("a", 10, (3, 7, 1)).user == "a" and kept.reused == 1
    assert kept.get("a", 10, (4, 8, 1)) is None  # a new interaction
    assert kept.get("a", 10, (3, 7, 2)) is None  # a new community model
    assert kept.get("a", 5, (3, 7, 1)) is None and kept.get("b", 10, (3, 7, 1)) is None
    time.sleep(0.25)
    assert kept.get("a", 10, (3, 7, 1)) is None and kept.reused == 1  # too old


def test_the_least_recently_asked_user_goes_first():
    kept = ServedLists(seconds=60, max_users=2)
    kept.put("a", 10, 1, _list("a"))
    kept.put("b", 10, 1, _list("b"))
    assert kept.get("a", 10, 1) is not None  # a asked again: b is now the oldest
    kept.put("c", 10, 1, _list("c"))
    assert kept.get("b", 10, 1) is None and kept.get("a", 10, 1) and kept.get("c", 10, 1)
