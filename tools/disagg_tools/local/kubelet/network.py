"""The node's pod network: a /24 of the loopback network that this kubelet alone hands out.

I/O layer (lock files). A node's pod CIDR is its own; here several kubelets can share one
host (two test workers, an embedded cluster beside a test run), so each takes the first
``127.0.N.0/24`` whose lock (an ``flock`` in the temp folder) no live process holds. The
lock goes with the process, so a killed run never leaves a network taken; the lock files are
readable by every user, so kubelets of different users on one host keep apart too.

Within its network a node hands out addresses as the CNI host-local IPAM does
(containernetworking/plugins v1.9.1, ``plugins/ipam/host-local/backend/allocator``:
``GetIter`` starts from the last reserved address + 1 and wraps): an address a deleted pod
freed is taken again only once the range has gone round, so a client holding a stale
endpoint list meets a refused connection, not another pod at the old address.

``disagg up``'s pods (:class:`Addresses`) take theirs the same way from a network this
process holds until it exits (:func:`process_network`), shared by every run it starts.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import threading
from collections.abc import Collection, Iterator
from pathlib import Path

FIRST, LAST = 1, 254  # 127.0.0.0/24 is the host's own
HOSTS = range(2, 255)  # .1 is the network's gateway, .255 its broadcast


def next_host(taken: Collection[int], last: int | None) -> int:
    """The address (its last octet) a new pod gets: the first free one after ``last``
    (the one reserved before; None: none yet), going round the range once."""
    start = 0 if last is None else HOSTS.index(last) + 1
    for i in range(len(HOSTS)):
        host = HOSTS[(start + i) % len(HOSTS)]
        if host not in taken:
            return host
    raise RuntimeError(f"no free pod address: all {len(HOSTS)} of the node's network are taken")


@contextlib.contextmanager
def leased(lock_dir: Path | None = None) -> Iterator[str]:
    """Hold a free pod network while the block runs; yields its prefix (``"127.0.N."``)."""
    folder = lock_dir or Path(tempfile.gettempdir())
    for n in range(FIRST, LAST + 1):
        lock = folder / f"disagg-pod-network-127.0.{n}.lock"
        try:  # read-only: another user's lock file can be locked too (flock needs no write)
            fd = os.open(lock, os.O_RDONLY | os.O_CREAT, 0o644)
        except PermissionError:  # not readable: count it as held
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        try:
            yield f"127.0.{n}."
        finally:
            os.close(fd)  # closing releases the lock
        return
    raise RuntimeError(
        f"every pod network 127.0.{FIRST}-{LAST}.0/24 is held by another local kubelet on this "
        "host: stop one (its lock files are disagg-pod-network-*.lock in the temp folder)"
    )


_PROCESS = contextlib.ExitStack()  # what this process holds until it exits
_HELD: list[str] = []
_LOCK = threading.RLock()


def process_network(lock_dir: Path | None = None) -> str:
    """A pod network this process holds until it exits, taken on first use (its prefix)."""
    with _LOCK:
        if not _HELD:
            _HELD.append(_PROCESS.enter_context(leased(lock_dir)))
        return _HELD[0]


def reserve(net: str, taken: Collection[int] = (), lock_dir: Path | None = None) -> int:
    """The next address (its last octet) of network ``net``, which the caller holds: after
    the one handed out last on this host, by this holder or the one before (kept beside
    the network's lock, as host-local keeps ``last_reserved_ip``), so a kubelet or run
    started after another does not take its addresses while they may still be in use."""
    last = (lock_dir or Path(tempfile.gettempdir())) / f"disagg-pod-network-{net}last"
    try:
        before: int | None = int(last.read_text())
    except (OSError, ValueError):
        before = None
    host = next_host(taken, before if before in HOSTS else None)
    with contextlib.suppress(OSError):  # another user's file: start over next time
        last.write_text(str(host))
    return host


class Addresses:
    """The pod addresses of one local run, from this process's network (:func:`reserve`),
    each pod's by its name."""

    def __init__(self, lock_dir: Path | None = None) -> None:
        self._given: dict[str, str] = {}
        self._lock_dir = lock_dir

    def __call__(self, pod: str) -> str:
        with _LOCK:
            if pod not in self._given:
                net = process_network(self._lock_dir)
                self._given[pod] = f"{net}{reserve(net, (), self._lock_dir)}"
            return self._given[pod]
