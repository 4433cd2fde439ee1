"""Concurrent queries encoded together (scix_core.embeddings.batching)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from scix_core.embeddings.batching import QueryBatcher


class Gate:
    """An encode_many that records its batches; the first call waits until ``release`` is set."""

    def __init__(self):
        self.release, self.started, self.batches = threading.Event(), threading.Event(), []

    def __call__(self, texts):
        self.batches.append(list(texts))
        if len(self.batches) == 1:
            self.started.set()
            assert self.release.wait(10)
        return np.array([[len(t), ord(t[-1])] for t in texts], dtype=np.float32)


def test_a_lone_query_is_encoded_at_once_alone():
    gate = Gate()
    gate.release.set()
    batcher = QueryBatcher(gate)
    assert batcher.encode("abc").tolist() == [3.0, ord("c")]
    assert gate.batches == [["abc"]] and (batcher.batches, batcher.texts) == (1, 1)


def test_queries_arriving_while_the_encoder_runs_are_encoded_in_one_next_batch_in_order():
    gate = Gate()
    batcher = QueryBatcher(gate, max_batch=4)
    with ThreadPoolExecutor(7) as pool:
        first = pool.submit(batcher.encode, "q0")
        assert gate.started.wait(10)
        later = [pool.submit(batcher.encode, f"query {i}") for i in range(1, 7)]
        deadline = time.monotonic() + 10
        while len(batcher._queue) < 6 and time.monotonic() < deadline:  # all six waiting behind the first
            time.sleep(0.01)
        gate.release.set()
        results = [first.result(10), *(f.result(10) for f in later)]
    assert gate.batches == [["q0"], ["query 1", "query 2", "query 3", "query 4"], ["query 5", "query 6"]]
    assert [r.tolist() for r in results] == [[2.0, ord("0")]] + [[7.0, ord(str(i))] for i in range(1, 7)]


def test_an_encoder_error_reaches_every_caller_of_its_batch_and_the_next_batch_runs():
    calls = []

    def encode_many(texts):
        calls.append(list(texts))
        if "bad" in texts:
            raise ValueError("cannot encode 'bad'")
        return np.ones((len(texts), 2), dtype=np.float32)

    batcher = QueryBatcher(encode_many)
    with pytest.raises(ValueError, match="cannot encode"):
        batcher.encode("bad")
    assert batcher.encode("good").tolist() == [1.0, 1.0]
    short = QueryBatcher(lambda texts: np.ones((0, 2)))
    with pytest.raises(RuntimeError, match="0 vectors for 1 texts"):
        short.encode("x")
