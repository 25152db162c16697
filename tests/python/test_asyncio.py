"""AsyncClient: token-exact completions, 100 requests in flight from
asyncio tasks, streams, cancel, ping, and an event loop that keeps
running other tasks while requests are in flight."""

import asyncio

import o1client
import pytest
from conftest import spec
from o1client import FinalEvent, TokenEvent

LONG = dict(max_tokens=2000, ignore_eos=True)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 300))


def test_generate_equals_o1model(daemon, reference):
    async def main():
        async with o1client.AsyncClient(daemon.socket) as c:
            for i in range(6):
                s = spec(i)
                got = await c.generate(list(s.ids), **s.params())
                assert got.token_ids == reference.ids(s)
    run(main())


def test_hundred_requests_in_flight(daemon, reference):
    specs = [spec(i) for i in range(100)]
    refs = {s: reference.ids(s) for s in set(specs[:10])}
    specs = [specs[i % 10] for i in range(100)]

    async def main():
        async with o1client.AsyncClient(daemon.socket) as c:
            got = await asyncio.gather(*[
                c.generate(list(s.ids), **s.params()) for s in specs])
            assert await c.inflight() == 0
            return got

    got = run(main())
    assert [g.token_ids for g in got] == [refs[s] for s in specs]


def test_async_stream(daemon, reference):
    s = spec(8)

    async def main():
        async with o1client.AsyncClient(daemon.socket) as c:
            stream = await c.generate(list(s.ids), stream=True,
                                      **s.params())
            assert isinstance(stream, o1client.AsyncStream)
            events = [ev async for ev in stream]
            assert isinstance(events[-1], FinalEvent)
            ids = [t for e in events if isinstance(e, TokenEvent)
                   for t in e.ids]
            assert ids == reference.ids(s)
            assert (await stream.completion()).token_ids == ids
    run(main())


def test_async_cancel(daemon):
    async def main():
        async with o1client.AsyncClient(daemon.socket) as c:
            stream = await c.submit([5, 6, 7], **LONG)
            n = 0
            async for ev in stream:
                n += isinstance(ev, TokenEvent)
                if n == 2:
                    await stream.cancel()
            assert stream.final.finish_reason == "cancelled"
            # by id, and leaving an async with block
            other = await c.submit([5, 6, 7], **LONG)
            await c.cancel(other.id)
            assert (await other.completion()).finish_reason == "cancelled"
            async with await c.submit([5, 6, 7], **LONG) as third:
                await third.__anext__()
            assert await c.inflight() in (0, 1)  # its FINAL may be due
    run(main())


def test_loop_runs_while_requests_wait(daemon):
    """Other tasks run while a request is in flight: the waiting happens
    in the client's waiter thread, not on the loop."""
    async def main():
        async with o1client.AsyncClient(daemon.socket) as c:
            stream = await c.submit([5, 6, 7], **LONG)
            ticks = 0

            async def ticker():
                nonlocal ticks
                while True:
                    await asyncio.sleep(0.001)
                    if not stream._req.done:
                        ticks += 1

            t = asyncio.ensure_future(ticker())
            async for ev in stream:
                if ticks >= 3:
                    await stream.cancel()
                    break
            t.cancel()
            assert ticks >= 3
            await stream.aclose()
    run(main())


def test_async_ping_and_errors(daemon, tmp_path):
    async def main():
        async with o1client.AsyncClient(daemon.socket) as c:
            assert await c.ping() > 0
            lat = await c.latency(20)
            assert lat.min_ns <= lat.p50_ns <= lat.p99_ns <= lat.max_ns
            with pytest.raises(o1client.BadRequestError):
                await c.generate([1, 10**6], max_tokens=2)
            with pytest.raises(ValueError):
                await c.generate([1, 2], max_tokens=0)
        with pytest.raises(o1client.ClientClosedError):
            await c.generate([1, 2], max_tokens=2)
        with pytest.raises(o1client.DaemonGoneError):
            await o1client.AsyncClient(str(tmp_path / "none.sock")).connect()
    run(main())
