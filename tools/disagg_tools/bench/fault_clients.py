"""The clients of `disagg bench faults`: HTTP load threads, a prefill that never answers,
a side-channel flood, and a process's resident memory.

I/O layer (threads, sockets, /proc). What to send is decided by the pure
:mod:`~disagg_tools.bench.rules.fault_requests` and
:mod:`~disagg_tools.bench.rules.hostile_frames`;
what the answers mean by :mod:`~disagg_tools.bench.rules.fault_figures`.
"""

from __future__ import annotations

import contextlib
import json
import random
import socket
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import zmq

from disagg_tools.bench.rules.fault_figures import NO_ANSWER, Record
from disagg_tools.bench.rules.hostile_frames import UNANSWERED

CLIENT_TIMEOUT_S = 120.0  # above the proxy's 60 s deadline: the proxy answers first
# after a failed request a client waits this long, as a retrying client does: a worker that
# is down answers 502 at once, and a busy loop would take the cores its restart needs
FAILURE_PAUSE_S = 0.05
Body = Callable[[random.Random, int], dict[str, Any]]  # (rng, request number) → JSON body


def post(url: str, body: dict[str, Any], timeout_s: float = CLIENT_TIMEOUT_S) -> Record:
    """POST ``body``; the record of when it went and what status came back. The answer is
    read to its end, so the time covers the whole response."""
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    start = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            resp.read()
            status = resp.status
    except urllib.error.HTTPError as e:
        e.read()
        status = e.code
    except (OSError, ValueError):  # refused, reset, timed out, or no HTTP at all
        status = NO_ANSWER
    return Record(start, time.monotonic(), status)


class Clients:
    """``threads`` clients, each sending ``body(rng, i)`` to ``url`` one request after
    another until :meth:`stop` (pausing :data:`FAILURE_PAUSE_S` after a failure); each
    thread has its own seeded random source."""

    def __init__(self, url: str, body: Body, threads: int, seed: str) -> None:
        self._url, self._body = url, body
        self._stop = threading.Event()
        self._records: list[Record] = []
        self._threads = [
            threading.Thread(target=self._client, args=(random.Random(f"{seed}-{t}"),))
            for t in range(threads)
        ]

    def _client(self, rng: random.Random) -> None:
        i = 0
        while not self._stop.is_set():
            record = post(self._url, self._body(rng, i))
            self._records.append(record)  # list.append is atomic: no lock
            i += 1
            if not record.ok:
                self._stop.wait(FAILURE_PAUSE_S)

    def start(self) -> Clients:
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> list[Record]:
        """Send no more; wait for the requests in flight; every record, by start time."""
        self._stop.set()
        for t in self._threads:
            t.join()
        return sorted(self._records, key=lambda r: r.start)

    def run_for(self, seconds: float) -> list[Record]:
        self.start()
        time.sleep(seconds)
        return self.stop()


@contextlib.contextmanager
def hung_peer() -> Iterator[int]:
    """A port on 127.0.0.1 that accepts TCP connections (the kernel completes them) but
    never reads or writes: a prefill whose process hangs. Yields the port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1024)  # connections wait in the backlog, never accepted
        yield int(sock.getsockname()[1])
    finally:
        sock.close()


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` in MiB (VmRSS)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    raise ValueError(f"/proc/{pid}/status has no VmRSS line")


@dataclass
class FloodResult:
    sent: int
    answered: int
    kinds: dict[str, int]
    seconds: float


def flood(
    host: str,
    port: int,
    frames: Iterable[tuple[str, bytes]],
    senders: int = 8,
    answer_timeout_s: float = 1.0,
) -> FloodResult:
    """Send every frame to a ROUTER listener from ``senders`` DEALER sockets at once, each
    as a REQ peer frames it ([b"", frame]); wait for the answer of a kind the listener
    answers (a DEALER, unlike REQ, is not stuck when an answer never comes)."""
    source = iter(frames)
    lock = threading.Lock()
    kinds: Counter[str] = Counter()
    answered = [0] * senders
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()

    wait_ms = int(answer_timeout_s * 1000)

    def connect() -> zmq.Socket[bytes]:
        sock = ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.SNDTIMEO, wait_ms)
        sock.connect(f"tcp://{host}:{port}")
        return sock

    def sender(n: int) -> None:
        sock = connect()
        try:
            while True:
                with lock:  # frames are made on demand: the whole flood never sits in memory
                    kind, frame = next(source, ("", b""))
                    if not kind:
                        return
                    kinds[kind] += 1
                with contextlib.suppress(zmq.Again):
                    sock.send_multipart([b"", frame])
                if kind in UNANSWERED:
                    # the listener drops this connection, and frames sent after it on the
                    # same one would be lost with it: go on over a new one (the old one
                    # flushes what it holds for up to wait_ms, then goes)
                    sock.close(linger=wait_ms)
                    sock = connect()
                elif sock.poll(wait_ms):
                    sock.recv_multipart()
                    answered[n] += 1
        finally:
            sock.close(linger=0)

    start = time.monotonic()
    threads = [threading.Thread(target=sender, args=(n,)) for n in range(senders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ctx.term()
    return FloodResult(sum(kinds.values()), sum(answered), dict(kinds), time.monotonic() - start)
