#!/usr/bin/env python3
"""sse_tokens.py — the token streams of issue 30 over a real HTTP/SSE stack
from PyPI (pinned in test/bench/sse-requirements.txt, installed into a venv by
hack/install-sse.sh; run with that venv's python): only this glue is ours.

  sse_tokens.py server --listen ADDR:PORT [--event BYTES] [--period-ms MS]
      uvicorn (uvloop, httptools) serving a Starlette app whose GET /tokens is
      an sse-starlette EventSourceResponse: one engine step every --period-ms
      (absolute schedule on CLOCK_MONOTONIC) gives every open stream its next
      event in lock-step, as vLLM's engine step does. Each event is one SSE
      `data:` line of JSON {"seq", "step_ns", "send_ns", "pad"} padded so that
      the encoded event is --event bytes; send_ns is stamped as the event is
      handed to the response (its write), step_ns is the step's time. A stream
      that could not write for a while (back-pressure) gets every step it
      missed, in order, each stamped as it is written: none is dropped.

  sse_tokens.py client --url URL --duration S [--streams N] [--event BYTES]
                       [--warmup S] [--drain S] [--label L] [--out FILE]
      httpx (AsyncClient on uvloop) + httpx-sse open N streams, then read
      events for --duration seconds plus --drain: each event's one-way delay
      is its read time minus its send_ns (CLOCK_MONOTONIC, which the lab's
      network namespaces share), counted when send_ns falls after --warmup and
      before --duration; the events missing are gaps in a stream's sequence
      and, at the end, the steps up to the last one stamped in the window that
      a stream never got. Writes loadgen tokens-client's JSON (events,
      missing, bad, closed, t0_unix_ns, delay_us) plus send_lag_us (the
      server's write time minus the step's: whether the Python server kept
      lock-step) and the stack's versions. Exit 0, 1 when events are missing
      or bad, a stream ended early or none arrived, 2 on a setup error (a
      stream could not open)."""

import argparse
import asyncio
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
STACK = ("uvicorn", "sse-starlette", "starlette", "uvloop", "httptools", "httpx", "httpx-sse")
PATH = "/tokens"
OPEN_TIMEOUT_S = 15.0  # every stream's response headers by then, or a setup error
STEPS_KEPT = 4096  # steps a lagging stream can still catch up on (~100 s at 25 ms)


def versions():
    from importlib.metadata import version  # noqa: PLC0415
    return {p: version(p) for p in STACK}


def event_data(seq, step_ns, send_ns, event_bytes):
    """The JSON of one event, padded so that its SSE encoding ("data: " +
    JSON + "\\n\\n") is event_bytes."""
    head = f'{{"seq":{seq},"step_ns":{step_ns},"send_ns":{send_ns},"pad":"'
    return head + "x" * max(0, event_bytes - 8 - len(head) - 2) + '"}'


# ------------------------------------------------------------------ server


class Engine:
    """The lock-step steps: seq counts them, steps[seq % STEPS_KEPT] is the
    monotonic time of each, and `tick` is set (then replaced) at every step."""

    def __init__(self, period_ms):
        self.period_ns = int(period_ms * 1e6)
        self.seq = 0
        self.steps = [0] * STEPS_KEPT
        self.tick = asyncio.Event()

    async def run(self):
        t0 = time.monotonic_ns()
        k = 0
        while True:
            k += 1
            wait = t0 + k * self.period_ns - time.monotonic_ns()
            if wait > 0:
                await asyncio.sleep(wait / 1e9)
            self.seq += 1
            self.steps[self.seq % STEPS_KEPT] = time.monotonic_ns()
            tick, self.tick = self.tick, asyncio.Event()
            tick.set()


def make_app(engine, event_bytes):
    from sse_starlette import EventSourceResponse, ServerSentEvent  # noqa: PLC0415
    from starlette.applications import Starlette  # noqa: PLC0415
    from starlette.routing import Route  # noqa: PLC0415

    async def tokens(request):
        async def stream():
            last = engine.seq
            while True:
                while engine.seq == last:
                    await engine.tick.wait()
                upto = engine.seq
                for seq in range(max(last + 1, upto - STEPS_KEPT + 1), upto + 1):
                    yield ServerSentEvent(data=event_data(seq, engine.steps[seq % STEPS_KEPT], time.monotonic_ns(),
                                                          event_bytes))
                last = upto
        # no keep-alive pings (their comments would be events of another size)
        return EventSourceResponse(stream(), ping=0, sep="\n")

    async def lifespan(app):
        task = asyncio.ensure_future(engine.run())
        try:
            yield
        finally:
            task.cancel()

    import contextlib  # noqa: PLC0415
    return Starlette(routes=[Route(PATH, tokens)], lifespan=contextlib.asynccontextmanager(lifespan))


def run_server(a):
    import uvicorn  # noqa: PLC0415
    host, _, port = a.listen.rpartition(":")
    engine = Engine(a.period_ms)
    cfg = uvicorn.Config(make_app(engine, a.event), host=host, port=int(port), loop="uvloop", http="httptools",
                         lifespan="on", access_log=False, log_level="warning", backlog=4096,
                         timeout_keep_alive=120)
    print(f"listening {a.listen} ({' '.join(f'{k} {v}' for k, v in versions().items())})", flush=True)
    uvicorn.Server(cfg).run()
    return 0


# ------------------------------------------------------------------ client


class Stream:
    __slots__ = ("last_seq",)

    def __init__(self):
        self.last_seq = 0


async def client_main(a):
    import httpx  # noqa: PLC0415
    from httpx_sse import aconnect_sse  # noqa: PLC0415
    sys.path.insert(0, HERE)
    import httpload  # noqa: PLC0415 (the project's latency summary)

    delays, lags = [], []
    counts = {"events": 0, "missing": 0, "bad": 0, "closed": 0}
    window = [None, None]  # send_ns bounds, set once every stream is open
    last_in_window = [0]
    streams = [Stream() for _ in range(a.streams)]
    opened = asyncio.Semaphore(0)
    failed = []

    async def one(client, st):
        try:
            async with aconnect_sse(client, "GET", a.url) as es:
                es.response.raise_for_status()
                opened.release()
                async for ev in es.aiter_sse():
                    now = time.monotonic_ns()
                    try:
                        d = json.loads(ev.data)
                        seq, step, sent = d["seq"], d["step_ns"], d["send_ns"]
                    except (ValueError, KeyError, TypeError):
                        counts["bad"] += 1
                        continue
                    if len(ev.data) + 8 != a.event:
                        counts["bad"] += 1
                    lo, hi = window
                    if lo is not None and lo <= sent < hi:
                        delays.append((now - sent) / 1e3 if now > sent else 0.0)
                        lags.append((sent - step) / 1e3)
                        counts["events"] += 1
                        if st.last_seq and seq > st.last_seq + 1:
                            counts["missing"] += seq - st.last_seq - 1
                        last_in_window[0] = max(last_in_window[0], seq)
                    st.last_seq = seq
            counts["closed"] += 1
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 (any failure of the stack ends this stream, counted)
            if window[0] is None:
                failed.append(f"{type(e).__name__}: {e}")
                opened.release()
            else:
                counts["closed"] += 1

    limits = httpx.Limits(max_connections=a.streams, max_keepalive_connections=a.streams)
    timeout = httpx.Timeout(10.0, read=None)
    async with httpx.AsyncClient(limits=limits, timeout=timeout) as client:
        tasks = [asyncio.ensure_future(one(client, st)) for st in streams]

        async def all_open():
            for _ in streams:
                await opened.acquire()
        try:
            await asyncio.wait_for(all_open(), OPEN_TIMEOUT_S)
        except asyncio.TimeoutError:
            failed.append(f"not every stream had its response headers after {OPEN_TIMEOUT_S:g} s")
        if failed:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            print(f"sse_tokens client: opening {a.streams} streams to {a.url} failed: "
                  f"{'; '.join(sorted(set(failed)))[:500]}", file=sys.stderr)
            return 2
        t0, t0_real = time.monotonic_ns(), time.time_ns()
        window[0], window[1] = t0 + int(a.warmup * 1e9), t0 + int(a.duration * 1e9)
        await asyncio.sleep(a.duration + a.drain)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    # the tail: every stream had each step up to the last one stamped in the window
    for st in streams:
        if st.last_seq < last_in_window[0]:
            counts["missing"] += last_in_window[0] - st.last_seq
    delays.sort()
    lags.sort()
    out = {"label": a.label, "streams": a.streams, "event_bytes": a.event, "duration_s": a.duration,
           "warmup_s": a.warmup, **counts, "t0_unix_ns": t0_real, "delay_us": httpload.latency_summary(delays),
           "send_lag_us": httpload.latency_summary(lags), "stack": versions()}
    with open(a.out, "w") if a.out else sys.stdout as f:
        json.dump(out, f)
        f.write("\n")
    return 1 if counts["missing"] or counts["bad"] or counts["closed"] or not counts["events"] else 0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("server")
    s.add_argument("--listen", required=True)
    s.add_argument("--event", type=int, default=300)
    s.add_argument("--period-ms", type=float, default=25.0)
    c = sub.add_parser("client")
    c.add_argument("--url", required=True)
    c.add_argument("--duration", type=float, required=True)
    c.add_argument("--streams", type=int, default=64)
    c.add_argument("--event", type=int, default=300)
    c.add_argument("--warmup", type=float, default=0.5)
    c.add_argument("--drain", type=float, default=2.0)
    c.add_argument("--label", default="")
    c.add_argument("--out")
    a = ap.parse_args(argv)
    if a.event < 96 or a.event > 16384:
        ap.error(f"--event {a.event}: want 96..16384 bytes (the JSON of an event needs 96)")
    if a.cmd == "server":
        if a.period_ms <= 0:
            ap.error(f"--period-ms {a.period_ms}: want > 0")
        return run_server(a)
    if a.streams < 1 or a.duration <= a.warmup:
        ap.error(f"--streams {a.streams} (want >= 1), --duration {a.duration} (want > --warmup {a.warmup})")
    import uvloop  # noqa: PLC0415
    return uvloop.run(client_main(a))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
