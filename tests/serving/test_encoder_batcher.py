"""EncoderBatcher's threads: batches form one at a time and run concurrently, each
request gets its own rows and token counts, and `close` drains every queued request; the
batching wait applies only while a batch runs, and a batch that starts beside a running one
runs on the model with fewer threads."""

import threading
import time

import numpy as np
import pytest

from transformer_zoo.serving.http import ServerSettings
from transformer_zoo.serving.http.encoder_batcher import EncoderBatcher
from transformer_zoo.serving.http.metrics import Metrics
from transformer_zoo.serving.http.models import ModelRegistry
from transformer_zoo.serving.http.scheduler import MAX_REQUEST, QueueFull, TooLarge


class FakeEncoder:
    """`embed_counted` of a model whose embedding of a text is its length; each call
    waits at `barrier` (when given) until as many calls are inside at once."""

    def __init__(self, barrier=None, hold=None):
        self.barrier = barrier
        self.hold = hold  # texts whose batch waits until `release` is set
        self.release = threading.Event()
        self.batches = []

    def embed_counted(self, texts, batch_size):
        self.batches.append(list(texts))
        if self.barrier is not None:
            self.barrier.wait()
        if self.hold in texts:
            assert self.release.wait(10)
        vectors = np.array([[len(t), 1.0] for t in texts], np.float32)
        return vectors, [len(t.split()) for t in texts]

    def classify(self, texts, text_pairs=None, batch_size=32):
        """Per text, what it was classified with: `(text, its pair or None)`; refuses
        pairs that are not one per text, as `ServedModel.classify`."""
        self.batches.append(list(texts))
        if text_pairs is not None and len(text_pairs) != len(texts):
            raise ValueError(f"{len(text_pairs)} pairs for {len(texts)} texts")
        return list(zip(texts, text_pairs or [None] * len(texts), strict=True))


@pytest.mark.parametrize("workers, concurrent", [(2, True), (1, False)])
def test_two_workers_run_two_batches_at_once(workers, concurrent):
    """Batches of one text each: with two workers both are inside the model together
    (the barrier of 2 opens); with one, the second waits for the first (the barrier
    times out)."""
    model = FakeEncoder(threading.Barrier(2, timeout=2.0))
    batcher = EncoderBatcher(model, max_batch_size=1, max_wait_ms=0, workers=workers)
    futures = [batcher.submit("embed", [text]) for text in ("a b", "c d e")]
    if concurrent:
        results = [f.result(timeout=10) for f in futures]
        assert [r[0][0, 0] for r in results] == [3.0, 5.0]
        assert [r[1] for r in results] == [[2], [3]]
    else:
        with pytest.raises(threading.BrokenBarrierError):
            futures[0].result(timeout=10)
    batcher.close(10)


def test_each_request_gets_its_rows_and_close_drains_the_queue():
    model = FakeEncoder()
    batcher = EncoderBatcher(model, max_batch_size=4, max_wait_ms=5, workers=3)
    requests = [[f"text {i} " + "x " * j for j in range(i % 3 + 1)] for i in range(40)]
    futures = [batcher.submit("embed", texts) for texts in requests]
    batcher.close(10)
    for texts, future in zip(requests, futures, strict=True):
        vectors, counts = future.result(timeout=0)  # done: close waited for it
        np.testing.assert_array_equal(vectors[:, 0], [len(t) for t in texts])
        assert counts == [len(t.split()) for t in texts]
    assert all(len(batch) <= 4 for batch in model.batches)
    assert sorted(t for batch in model.batches for t in batch) == sorted(
        t for texts in requests for t in texts
    )


def test_an_idle_model_runs_a_request_at_once():
    """A wait of 60 s would fail `result(timeout=10)`: with nothing running, none is taken."""
    batcher = EncoderBatcher(FakeEncoder(), max_batch_size=8, max_wait_ms=60_000)
    vectors, counts = batcher.submit("embed", ["a b c"]).result(timeout=10)
    assert vectors[0, 0] == 5.0 and counts == [3]
    batcher.close(10)


def test_requests_arriving_while_a_batch_runs_share_the_next_one():
    """While the first batch is held inside the model, three requests fill the next batch
    (`max_batch_size` 3) and it runs without waiting out the 60 s; a request arriving after
    that waits for the model to fall idle, then runs at once."""
    model = FakeEncoder(hold="first")
    batcher = EncoderBatcher(model, max_batch_size=3, max_wait_ms=60_000, workers=2)
    first = batcher.submit("embed", ["first"])
    while not model.batches:
        pass
    full = [batcher.submit("embed", [text]) for text in ("b", "c", "d")]
    [f.result(timeout=10) for f in full]
    assert model.batches == [["first"], ["b", "c", "d"]]
    late = batcher.submit("embed", ["e"])
    assert not late.done()  # the model is busy: "e" waits for others
    model.release.set()
    first.result(timeout=10)
    assert late.result(timeout=10)[0][0, 0] == 1.0  # ran once the model fell idle
    assert model.batches[-1] == ["e"]
    batcher.close(10)


@pytest.mark.parametrize("pair_first", [False, True])
def test_single_texts_and_pairs_in_one_batch_are_each_classified_as_alone(pair_first):
    """A classify request of single texts and one of text pairs that wait together (the
    one worker is busy) share a batch, but run as two model calls: each gets what it gets
    classified alone (`classify(texts, pairs)`), not the other's pairs or None."""
    model = FakeEncoder(hold="first")
    batcher = EncoderBatcher(model, max_batch_size=8, max_wait_ms=0, workers=1)
    first = batcher.submit("embed", ["first"])
    while not model.batches:
        pass
    requests = [(["a", "b"], None), (["c"], ["d"])]
    if pair_first:
        requests.reverse()
    futures = [batcher.submit("classify", texts, pairs=pairs) for texts, pairs in requests]
    model.release.set()
    first.result(timeout=10)
    for (texts, pairs), future in zip(requests, futures, strict=True):
        assert future.result(timeout=10) == FakeEncoder().classify(texts, pairs)
    batcher.close(10)


def test_a_request_larger_than_the_queue_waits_for_it_to_empty():
    """With a text waiting, a request that would overfill the queue is refused whole (none
    of its texts run); once nothing waits, one larger than the queue is taken; past
    `MAX_REQUEST` texts, never."""
    model = FakeEncoder(hold="held")
    batcher = EncoderBatcher(model, max_batch_size=8, max_wait_ms=0, max_queue=2, workers=1)
    held = batcher.submit("embed", ["held"])
    while not model.batches:
        pass
    waiting = batcher.submit("embed", ["a"])  # the one worker is busy: it waits
    for texts in (["b", "c"], [f"big {i}" for i in range(5)]):
        with pytest.raises(QueueFull):
            batcher.submit("embed", texts)
    model.release.set()
    held.result(timeout=10)
    waiting.result(timeout=10)
    big = [f"big {i}" for i in range(5)]
    vectors, counts = batcher.submit("embed", big).result(timeout=10)
    np.testing.assert_array_equal(vectors[:, 0], [len(t) for t in big])
    with pytest.raises(TooLarge, match=f"{MAX_REQUEST + 1} texts; the most is {MAX_REQUEST}"):
        batcher.submit("embed", ["x"] * (MAX_REQUEST + 1))
    batcher.close(10)
    assert [t for batch in model.batches for t in batch] == ["held", "a", *big]


def test_a_batch_beside_a_running_one_runs_on_the_concurrent_model():
    model, narrow = FakeEncoder(hold="first"), FakeEncoder()
    batcher = EncoderBatcher(model, max_wait_ms=0, workers=2, concurrent_served=narrow)
    first = batcher.submit("embed", ["first"])
    while not model.batches:
        pass
    assert batcher.submit("embed", ["second"]).result(timeout=10)[1] == [1]
    assert narrow.batches == [["second"]]
    model.release.set()
    first.result(timeout=10)
    deadline = time.monotonic() + 10
    while batcher._running and time.monotonic() < deadline:  # "first" leaves the model
        time.sleep(0.001)
    batcher.submit("embed", ["third"]).result(timeout=10)
    assert model.batches == [["first"], ["third"]] and narrow.batches == [["second"]]
    batcher.close(10)


@pytest.mark.parametrize(
    "threads, workers, narrow", [(2, 2, 1), (4, 2, 2), (2, 1, None), (1, 2, None)]
)
def test_the_server_gives_concurrent_batches_a_session_of_fewer_threads(
    wordpiece_artifacts, threads, workers, narrow
):
    """threads // workers each (at least 1), loaded only where that is fewer than `threads`;
    both sessions give the same embeddings."""
    settings = ServerSettings(threads=threads, encoder_workers=workers)
    registry = ModelRegistry({}, settings, Metrics())
    entry = registry._load("embedder", str(wordpiece_artifacts.export_dir))
    try:
        concurrent = entry.worker.concurrent_served
        if narrow is None:
            assert concurrent is entry.served
        else:
            session = concurrent.runner.sessions["model"]
            assert session.get_session_options().intra_op_num_threads == narrow
            texts = ["the cat sat on the mat", "dogs"]
            np.testing.assert_allclose(
                concurrent.embed(texts), entry.served.embed(texts), atol=1e-6
            )
    finally:
        entry.worker.close(10)


def test_bad_worker_counts_are_refused():
    with pytest.raises(ValueError, match="workers"):
        EncoderBatcher(FakeEncoder(), workers=0)


def test_a_request_whose_client_left_the_queue_frees_its_places():
    """A cancelled future (its client went away) kept its texts' places in the queue
    until a batch reached it: a new request got 429 with nobody waiting."""
    model = FakeEncoder(hold="held")
    batcher = EncoderBatcher(model, max_batch_size=8, max_wait_ms=0, max_queue=2, workers=1)
    held = batcher.submit("embed", ["held"])
    while not model.batches:
        pass
    left = batcher.submit("embed", ["a", "b"])  # the one worker is busy: it waits
    with pytest.raises(QueueFull):
        batcher.submit("embed", ["c"])
    assert left.cancel()  # as the server cancels it when the client disconnects
    taken = batcher.submit("embed", ["c", "d"])
    model.release.set()
    held.result(timeout=10)
    vectors, _ = taken.result(timeout=10)
    np.testing.assert_array_equal(vectors[:, 0], [1, 1])
    batcher.close(10)
    assert [t for batch in model.batches for t in batch] == ["held", "c", "d"]
