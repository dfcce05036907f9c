"""The other pods of a group: each runs its share of the engine's tensor-parallel ranks and
serves nothing itself.

I/O layer. ``disagg worker serve`` on a pod whose ``DISAGG_NODE_RANK`` is above 0 (a
LeaderWorkerSet worker: the operator renders the LWS environment into ``DISAGG_NODES``,
``DISAGG_NODE_RANK`` and ``DISAGG_LEADER_ADDRESS``) starts the ranks
:attr:`WorkerConfig.ranks_here` as :mod:`serve.rank_worker` processes that join rank 0 on
the first pod over the group's ports (:func:`collective.group_ports`), and runs until one
of them ends or it is told to stop (SIGTERM, SIGINT). Then it stops the others and
exits, non-zero when a rank failed: the pod restarts, and LeaderWorkerSet recreates the
whole group (a rank alone cannot rejoin an engine whose other ranks went on).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading

from disagg_contract.config import WorkerConfig
from disagg_worker.serve.collective import group_ports
from disagg_worker.serve.process import die_with_parent
from disagg_worker.serve.tp import STOP_WAIT_S, rank_env

log = logging.getLogger("disagg.worker.members")
POLL_S = 0.5


def rank_argv(config: WorkerConfig, rank: int) -> list[str]:
    """The command of rank ``rank`` of this pod: rank 0's sockets and store on the first
    pod of the group."""
    store, up, down = group_ports(config.group_port, rank)
    leader = config.leader_address
    return [
        *(sys.executable, "-m", "disagg_worker.serve.rank_worker"),
        *("--down", f"tcp://{leader}:{down}", "--up", f"tcp://{leader}:{up}"),
        *("--store-host", leader, "--store-port", str(store)),
    ]


def run(config: WorkerConfig) -> int:
    """Run this pod's ranks until one ends or a signal comes (see module docstring)."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    procs = {
        rank: subprocess.Popen(
            rank_argv(config, rank),
            env=rank_env(config, rank, dict(os.environ)),
            preexec_fn=die_with_parent,
        )
        for rank in config.ranks_here
    }
    log.info("ranks %s of %d started", list(procs), config.tp_size)
    failed = 0
    while not stop.wait(POLL_S):
        ended = {r: p.returncode for r, p in procs.items() if p.poll() is not None}
        if ended:
            failed = max(ended.values(), default=0)
            log.warning("rank(s) %s ended (%s): the group stops", list(ended), ended)
            break
    for proc in procs.values():
        if proc.poll() is None:
            proc.terminate()
    for proc in procs.values():
        try:
            proc.wait(timeout=STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=STOP_WAIT_S)
    return 1 if failed else 0
