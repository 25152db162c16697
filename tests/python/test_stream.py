"""Streams: events in order, their ids and text add up to the
Completion, many streams in flight on one client, cancel (by the stream,
by id from another thread, by leaving a with block), and 100 requests
from 10 threads, each token-exact against `o1model run`."""

import threading

import o1client
import pytest
from conftest import spec
from o1client import FinalEvent, LogprobsEvent, TokenEvent

# longer than any test waits before it cancels: the tiny model's
# context is 2048
LONG = dict(max_tokens=2000, ignore_eos=True)


def test_stream_events_match_completion(client, reference):
    s = spec(9)
    stream = client.generate(list(s.ids), stream=True, logprobs=2,
                             **s.params())
    assert isinstance(stream, o1client.Stream)
    events = list(stream)
    assert isinstance(events[-1], FinalEvent)
    assert not any(isinstance(e, FinalEvent) for e in events[:-1])
    assert all(e.req_id == stream.id for e in events)
    ids = [t for e in events if isinstance(e, TokenEvent) for t in e.ids]
    assert ids == reference.ids(s)
    positions = {e.position for e in events if isinstance(e, LogprobsEvent)}
    assert positions == set(range(len(ids)))
    assert stream.final is events[-1]
    assert stream.final.generated_tokens == len(ids)
    assert list(stream) == []  # nothing after the FINAL


def test_stream_text_matches(client, reference):
    ref_ids, raw = reference.text("hello world", 20)
    stream = client.generate("hello world", max_tokens=20, stream=True)
    text = "".join(e.text for e in stream if isinstance(e, TokenEvent))
    assert text == raw.decode("utf-8", "replace")


def test_many_streams_one_thread(client, reference):
    specs = [spec(i) for i in range(20)]
    streams = [client.generate(list(s.ids), stream=True, **s.params())
               for s in specs]
    # read them in reverse: the others' events wait in their queues
    for s, st in reversed(list(zip(specs, streams))):
        assert st.completion().token_ids == reference.ids(s)
    assert client.inflight() == 0


def test_interleaved_reading(client, reference):
    a_spec, b_spec = spec(4), spec(7)
    a = client.generate(list(a_spec.ids), stream=True, **a_spec.params())
    b = client.generate(list(b_spec.ids), stream=True, **b_spec.params())
    ia, ib = iter(a), iter(b)
    done = {"a": False, "b": False}
    while not all(done.values()):
        for key, it in (("a", ia), ("b", ib)):
            if not done[key]:
                done[key] = isinstance(next(it), FinalEvent)
    assert a.completion().token_ids == reference.ids(a_spec)
    assert b.completion().token_ids == reference.ids(b_spec)


def test_cancel_by_stream(client):
    stream = client.generate([5, 6, 7], stream=True, **LONG)
    n = 0
    for ev in stream:
        if isinstance(ev, TokenEvent):
            n += 1
            if n == 3:
                stream.cancel()
    assert stream.final.finish_reason == "cancelled"
    assert 3 <= stream.final.generated_tokens < LONG["max_tokens"]
    c = stream.completion()
    assert c.finish_reason == "cancelled"
    assert len(c.token_ids) == stream.final.generated_tokens


def test_cancel_by_id_from_another_thread(client):
    stream = client.generate([5, 6, 7], stream=True, **LONG)
    first, sent = threading.Event(), threading.Event()

    def cancel() -> None:
        first.wait(60)
        client.cancel(stream.id)
        sent.set()

    t = threading.Thread(target=cancel)
    t.start()
    for ev in stream:
        if not first.is_set():
            first.set()
            assert sent.wait(60)
    t.join()
    assert stream.final.finish_reason == "cancelled"


def test_with_block_cancels(client, reference):
    with client.generate([5, 6, 7], stream=True, **LONG) as stream:
        next(iter(stream))
    assert list(stream) == []
    # the connection is still good, and the abandoned events are gone
    s = spec(0)
    assert client.generate(list(s.ids), **s.params()).token_ids == \
        reference.ids(s)


def test_hundred_requests_from_ten_threads(client, reference):
    specs = [spec(i) for i in range(10)]
    refs = [reference.ids(s) for s in specs]
    bad, errors = [], []

    def work(k: int) -> None:
        try:
            for j in range(10):
                s = specs[(k + j) % 10]
                if j % 2:
                    got = client.generate(list(s.ids), **s.params())
                else:
                    got = client.generate(list(s.ids), stream=True,
                                          **s.params()).completion()
                if got.token_ids != refs[(k + j) % 10]:
                    bad.append((k, j))
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and bad == []
    assert client.inflight() == 0


def test_threads_with_their_own_clients(daemon, reference):
    s = spec(5)
    ok = []

    def work() -> None:
        with o1client.Client(daemon.socket) as c:
            ok.append(all(c.generate(list(s.ids), **s.params()).token_ids
                          == reference.ids(s) for _ in range(5)))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert ok == [True] * 4


def test_stream_keeps_its_connection(daemon, reference):
    s = spec(1)
    stream = o1client.Client(daemon.socket).generate(list(s.ids),
                                                     stream=True,
                                                     **s.params())
    # the Client object is gone; its connection lives with the stream
    assert stream.completion().token_ids == reference.ids(s)


def test_timeout_cancels(client, reference):
    with pytest.raises(o1client.O1TimeoutError) as ei:
        client.generate([5, 6, 7], timeout=0, **LONG)
    assert isinstance(ei.value, TimeoutError)
    with pytest.raises(o1client.O1TimeoutError):
        stream = client.generate([5, 6, 7], timeout=0, stream=True, **LONG)
        next(stream)
    stream.close()
    s = spec(2)
    assert client.generate(list(s.ids), **s.params()).token_ids == \
        reference.ids(s)
