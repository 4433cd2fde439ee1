"""Queries that arrive together are encoded together.

A transformer's cost for a short text is mostly per call, not per token: on one thread the query model
(MiniLM, OpenVINO int8) took 3.2 ms for one title, 2.0 ms a title in a batch of four
(docs/history.md). A server answers several searches at once, and they used to queue on the query
session's lock one by one. :class:`QueryBatcher` lets the first caller run the encoder on every text
queued by then; the callers who arrive while it runs wait, and the first of them to wake runs the next
batch with all of theirs. Nobody waits for a batch to fill: a lone query is encoded at once, alone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import numpy as np

#: the most texts one call encodes (a burst larger than this is split into several calls)
MAX_BATCH = 16


class _Pending:
    __slots__ = ("text", "vector", "error")

    def __init__(self, text: str):
        self.text, self.vector, self.error = text, None, None

    @property
    def done(self) -> bool:
        return self.vector is not None or self.error is not None


class QueryBatcher:
    """``encode(text)`` from any thread; ``encode_many(texts)`` (rows in the texts' order) runs on one
    thread at a time, with whatever texts are waiting. An exception of a batch is raised in each caller
    whose text was in it."""

    def __init__(self, encode_many: Callable[[Sequence[str]], np.ndarray], max_batch: int = MAX_BATCH):
        self.encode_many, self.max_batch = encode_many, max_batch
        self._queue: list[_Pending] = []
        self._busy = False
        self._cond = threading.Condition()
        self.batches = 0  # calls of encode_many so far, and the texts they encoded (for the bench)
        self.texts = 0

    def encode(self, text: str) -> np.ndarray:
        mine = _Pending(text)
        with self._cond:
            self._queue.append(mine)
        while True:
            with self._cond:
                while self._busy and not mine.done:
                    self._cond.wait()
                if mine.done:
                    break
                self._busy = True  # this thread runs the next batch: the oldest waiting texts, its own among
                batch, self._queue = self._queue[: self.max_batch], self._queue[self.max_batch :]
            self._run(batch)
        if mine.error is not None:
            raise mine.error
        return mine.vector

    def _run(self, batch: list[_Pending]) -> None:
        try:
            vectors = self.encode_many([p.text for p in batch])
            if len(vectors) != len(batch):
                raise RuntimeError(f"the encoder returned {len(vectors)} vectors for {len(batch)} texts")
            for p, v in zip(batch, vectors):
                p.vector = np.array(v)  # its own row, not a view of the batch's array
        except BaseException as exc:  # noqa: BLE001 — handed to every caller of the batch, raised there
            for p in batch:
                p.error = exc
        finally:
            with self._cond:
                self._busy = False
                self.batches += 1
                self.texts += len(batch)
                self._cond.notify_all()
