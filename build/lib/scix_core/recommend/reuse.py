"""Served lists kept for reuse: a user asking again when nothing their list depends on has changed.

A recommendation is a function of the user's interactions (exploration is seeded by the user and their
number of interactions), the community's co-save model, the configuration and, for trending and a
dismissal's suppression, the clock. A server keeps each user's last list with the key it was made under —
the limit, the user's onboarding categories (Tier 0's trending), interaction count and newest interaction
id, the community's version — and answers a request with the same key within ``recommend.reuse_s``
seconds from it, skipping the tier's pipeline (a Tier-1 list at 50 saves: ~12 of its ~14 ms). A save,
dismissal or view by any worker changes the user's key (it is read from the state each time); other users'
saves change the community's version at its next refresh. The list is logged as served again either way.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Hashable

from scix_core.recommend.result import Recommendations

#: the note a reused list carries
REUSED = (
    "the list of this user's last request: no interaction and no community change since (recommend.reuse_s)"
)
#: users whose last list is kept (least recently asked dropped first)
MAX_USERS = 4096


class ServedLists:
    def __init__(self, seconds: float, max_users: int = MAX_USERS):
        self.seconds, self.max_users = seconds, max_users
        self._lists: OrderedDict[tuple[str, int], tuple[Hashable, float, Recommendations]] = OrderedDict()
        self._lock = threading.Lock()
        self.reused = 0

    def get(self, user: str, limit: int, key: Hashable) -> Recommendations | None:
        """The list kept for ``user`` at ``limit`` when it was made under ``key`` within the last
        ``seconds``; None otherwise."""
        with self._lock:
            kept = self._lists.get((user, limit))
            if kept is None or kept[0] != key or time.monotonic() - kept[1] > self.seconds:
                return None
            self._lists.move_to_end((user, limit))
            self.reused += 1
            return kept[2]

    def put(self, user: str, limit: int, key: Hashable, result: Recommendations) -> None:
        with self._lock:
            self._lists[(user, limit)] = (key, time.monotonic(), result)
            self._lists.move_to_end((user, limit))
            while len(self._lists) > self.max_users:
                self._lists.popitem(last=False)
