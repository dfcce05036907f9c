"""`disagg worker wire peer|probe`: which wire UCX moves KV on between two pods.

I/O layer (NIXL, HTTP, a memfd). An engine's own NIXL agent cannot be asked what UCX chose
for it, so a second pair of agents, ours, run between the same two pods with the engine's
UCX settings (the pod's ``UCX_*`` env) and UCX tells: ``peer`` (in a prefill pod) registers
a small buffer and offers its NIXL metadata over HTTP; ``probe`` (the decode pod's canary
runs it, one process per check) READs that buffer with ``UCX_PROTO_INFO=y`` and reads
UCX's protocol report back (:mod:`.rules.ucx_report`). The report goes to a memfd (a
read-only root has no file to write) and is flushed from C stdio before it is read: UCX
buffers its log. Neither side imports torch: the probe runs beside the canary in its
small container.
"""

from __future__ import annotations

import argparse
import base64
import ctypes
import json
import os
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

from disagg_contract import commandline, ucx
from disagg_contract.canary import WIRE_PEER_PORT
from disagg_worker.transfer.nixl_compat import make_agent
from disagg_worker.transfer.rules.ucx_report import chosen_read

DEFAULT_PORT = WIRE_PEER_PORT
PATH = "/wire"
NBYTES = 1 << 20  # 1 MiB: enough for UCX to pick its large-message protocol
WINDOW_S = 10.0  # the peer progresses UCX this long after each offer
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def pattern(nbytes: int) -> np.ndarray:
    """The peer's bytes: a probe checks every one it read."""
    return (np.arange(nbytes, dtype=np.uint64) % 251).astype(np.uint8)


class _Agent:
    """A NIXL agent with the UCX backend and one registered host buffer."""

    def __init__(self, name: str, buffer: np.ndarray) -> None:
        self.nixl = make_agent(name, telemetry=False)
        self.nixl.create_backend("UCX", {})
        self.buffer = buffer
        self.desc = [(int(buffer.ctypes.data), int(buffer.nbytes), 0, "")]
        self.reg = self.nixl.register_memory(self.desc, "DRAM")

    def close(self) -> None:
        self.nixl.deregister_memory(self.reg)


class Peer:
    """The prefill pod's side: offers its agent and buffer, progresses UCX for a while
    after each offer (no NIXL progress thread: it would spin a core all day)."""

    def __init__(self, name: str = "wire-peer", nbytes: int = NBYTES) -> None:
        self.agent = _Agent(name, pattern(nbytes))
        self.offer = {
            "metadata": base64.b64encode(bytes(self.agent.nixl.get_agent_metadata())).decode(),
            "address": self.agent.desc[0][0],
            "nbytes": nbytes,
        }
        self.until = 0.0

    def offered(self) -> dict[str, Any]:
        self.until = time.monotonic() + WINDOW_S
        return self.offer

    def progress_forever(self, stop: threading.Event) -> None:
        while not stop.is_set():
            busy = time.monotonic() < self.until
            if busy:
                self.agent.nixl.get_new_notifs()
            stop.wait(0.001 if busy else 0.05)


def serve(peer: Peer, host: str, port: int) -> None:
    """Answer ``GET /wire`` with the offer until interrupted."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            found = self.path == PATH
            body = json.dumps(peer.offered() if found else {"error": f"GET {PATH}"}).encode()
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    stop = threading.Event()
    thread = threading.Thread(target=peer.progress_forever, args=(stop,), daemon=True)
    thread.start()
    print(json.dumps({"event": "ready", "role": "wire-peer", "http_port": server.server_port}))
    sys.stdout.flush()
    try:
        server.serve_forever()
    finally:
        stop.set()
        server.server_close()


def report_to_memfd() -> int:
    """Send UCX's log, with its protocol report, to a memfd; before UCX loads."""
    fd = os.memfd_create("ucx-report")
    os.environ.update({"UCX_PROTO_INFO": "y", "UCX_LOG_FILE": f"/proc/{os.getpid()}/fd/{fd}"})
    return fd


def read_report(fd: int) -> str:
    ctypes.CDLL(None).fflush(None)  # UCX writes through C stdio and never flushes
    os.lseek(fd, 0, os.SEEK_SET)
    return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")


def probe(url: str, timeout_s: float, fd: int) -> dict[str, Any]:
    """READ the peer's buffer at ``url`` once; the report: ``ok``, what failed (``step``,
    ``error``), the bytes, seconds, whether they were the peer's, and the wire UCX chose."""
    out: dict[str, Any] = {"peer": url, "ok": False, "step": "offer"}
    try:
        with DIRECT.open(url.rstrip("/") + PATH, timeout=timeout_s) as resp:
            offer = json.loads(resp.read())
        out["step"] = "read"
        nbytes = int(offer["nbytes"])
        agent = _Agent(f"wire-probe-{os.getpid()}", np.zeros(nbytes, dtype=np.uint8))
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        return {**out, "error": f"{type(e).__name__}: {e}"}
    try:
        state, seconds = _read(agent, offer, timeout_s)
        out |= {"state": state, "bytes": nbytes, "seconds": round(seconds, 6)}
        verified = state == "DONE" and bool((agent.buffer == pattern(nbytes)).all())
        out |= {"ok": verified, "step": "done" if verified else "read", "verified": verified}
        if not verified:
            out["error"] = f"the READ ended {state}" + (
                ", bytes differ from the peer's" if state == "DONE" else ""
            )
    except Exception as e:  # NIXL raises its own types
        out["error"] = f"{type(e).__name__}: {e}"
    finally:
        agent.close()
    return {**out, **wire_fields(read_report(fd))}


def _read(agent: _Agent, offer: dict[str, Any], timeout_s: float) -> tuple[str, float]:
    nixl = agent.nixl
    name = nixl.add_remote_agent(base64.b64decode(offer["metadata"]))
    remote = [(int(offer["address"]), int(offer["nbytes"]), 0)]
    local = [(agent.desc[0][0], agent.desc[0][1], 0)]
    handle = nixl.initialize_xfer(
        "READ", nixl.get_xfer_descs(local, "DRAM"), nixl.get_xfer_descs(remote, "DRAM"), name
    )
    t0 = time.perf_counter()
    try:
        state = str(nixl.transfer(handle))
        while state == "PROC" and time.perf_counter() - t0 < timeout_s:
            time.sleep(0.0002)
            state = str(nixl.check_xfer_state(handle))
        return state, time.perf_counter() - t0
    finally:
        handle.release()
        nixl.remove_remote_agent(name)


def wire_fields(report: str) -> dict[str, Any]:
    """The wire UCX chose, as JSON fields: ``scope`` (where UCX saw the peer),
    ``transports``, ``wire`` (:func:`disagg_contract.ucx.wire` of the first), ``chose``
    (UCX's words); all null when the report names no READ."""
    found = chosen_read(report)
    if found is None or not found.transports:
        return {"scope": None, "transports": None, "wire": None, "chose": None}
    return {
        "scope": found.scope,
        "transports": list(found.transports),
        "wire": ucx.wire(found.transports[0]),
        "chose": found.describe(),
    }


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        formatter_class=commandline.HelpFormatter,
        prog="disagg worker wire",
        description=__doc__.split("\n")[0],
    )
    sub = p.add_subparsers(dest="side", required=True)
    peer = sub.add_parser("peer", help="offer a buffer to probes (in a prefill pod)")
    peer.add_argument("--host", default="0.0.0.0")
    peer.add_argument("--port", type=int, default=DEFAULT_PORT, help="0: any free port")
    read = sub.add_parser("probe", help="READ a peer's buffer and print the wire (JSON)")
    read.add_argument("--peer", required=True, metavar="URL", help="the peer, http://HOST:PORT")
    read.add_argument("--timeout-s", type=float, default=5.0)
    args = p.parse_args(argv)
    if args.side == "peer":
        serve(Peer(), args.host, args.port)
        return 0
    fd = report_to_memfd()
    result = probe(args.peer, args.timeout_s, fd)
    print(json.dumps(result), flush=True)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
