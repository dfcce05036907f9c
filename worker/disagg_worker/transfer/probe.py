"""`disagg worker probe`: a transfer-path self-check against a prefill worker.

CLI layer. Takes this pod's ``DISAGG_*`` settings (backends, UCX, HMAC secret, device) as a
decode worker (``--secret-file`` names the secret where no pod's env does), fetches the
peer's metadata, adopts its layout (with a small cache of its own), READs a few blocks
through NIXL and reports: reachable, compatible, transfer works, and how fast. Prints one
line of text, or a JSON object with ``--json``; exit status 0 when the path works, 1 when
it does not (the error says which step failed and why).

A tensor-parallel prefill is probed rank by rank: one small agent per rank, each holding
that rank's heads, reads from it (where rank 0's metadata says it listens), so every
rank's path is proven.

Reading blocks from a live prefill worker is harmless: it only reads, and the worker
ignores the notification of a request id it never published. Nothing is published for
the probe, so it reads without a claim (``read(claim=False)``): it checks the path, not
the blocks' content.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Any

import msgspec

from disagg_contract import commandline
from disagg_contract.config import ConfigError, WorkerConfig
from disagg_worker.transfer import handshake
from disagg_worker.transfer.rules import protocol
from disagg_worker.transfer.rules.layout import KVLayout


def peer_meta(cfg: WorkerConfig, host: str, port: int, timeout: float) -> protocol.PeerMetadata:
    """Fetch the peer's metadata over the side channel (no NIXL)."""
    import zmq

    codec = protocol.Codec(handshake.load_secret(cfg.hmac_secret_path))
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    try:
        req = protocol.MetadataRequest(cfg.engine_id or "probe", "", os.urandom(16))
        msg = codec.decode(handshake.request(ctx, host, port, codec.encode(req), timeout))
    finally:
        ctx.term()
    if isinstance(msg, protocol.Refused):
        raise RuntimeError(f"peer refused the handshake: {msg.reason}")
    if not isinstance(msg, protocol.PeerMetadata):
        raise RuntimeError(f"peer answered {type(msg).__name__}, not its metadata")
    return msg


@dataclass(frozen=True)
class _Ask:
    """What a probe reads with: this pod's settings, the prefill's side channel (host,
    port, expected engine id), the deadline, the pattern expected (None: any bytes)."""

    cfg: WorkerConfig
    where: tuple[str, int, str]
    deadline: float
    expect_seed: int | None


def probe(
    cfg: WorkerConfig,
    host: str,
    port: int,
    *,
    engine_id: str,
    blocks: int,
    deadline: float,
    expect_seed: int | None = None,
) -> dict[str, Any]:
    """Run the check; returns the report (``ok`` False with ``step`` and ``error``)."""
    from disagg_worker.transfer.peers import TransferError

    report: dict[str, Any] = {"peer": f"{host}:{port}", "ok": False, "step": "handshake"}
    try:
        meta = peer_meta(cfg, host, port, deadline)
        theirs = KVLayout.model_validate(msgspec.structs.asdict(meta.layout))
    except (handshake.HandshakeTimeout, protocol.ProtocolError, RuntimeError, ValueError) as e:
        return {**report, "error": str(e)}
    n = max(1, min(blocks, theirs.num_blocks))
    layout = theirs.model_copy(update={"num_blocks": n})
    report.update(layout=theirs.model_dump(mode="json"), ranks=meta.tp_size)
    ask = _Ask(cfg, (host, port, engine_id), deadline, expect_seed)
    nbytes, ndesc, total_ms, ok = 0, 0, 0.0, True
    for rank in range(meta.tp_size):  # as rank r of the prefill's TP size: reads rank r
        try:
            stats, verified = _probe_rank(ask, meta, layout, rank, report)
        except (TransferError, RuntimeError, ValueError) as e:
            where = f" (rank {rank} of {meta.tp_size})" if meta.tp_size > 1 else ""
            return {**report, "error": f"{e}{where}"}
        nbytes, ndesc = nbytes + stats.bytes, ndesc + stats.descriptors
        total_ms, ok = total_ms + stats.total_ms, ok and verified
    report.update(
        ok=True,
        step="done",
        bytes=nbytes,
        descriptors=ndesc,
        transfer_ms=round(total_ms, 3),
        gbps=round(nbytes / max(total_ms, 1e-6) / 1e6, 3),
    )
    if expect_seed is not None:
        report.update(ok=ok, step="done" if ok else "verify", verified=ok)
        if not ok:
            report["error"] = "bytes read differ from the expected pattern"
    return report


def _probe_rank(
    ask: _Ask, meta: protocol.PeerMetadata, layout: KVLayout, rank: int, report: dict[str, Any]
) -> tuple[Any, bool]:
    """Read ``layout.num_blocks`` blocks of prefill rank ``rank`` with an agent of its own
    (rank ``rank`` of the prefill's TP size); its stats, and whether the bytes are the
    expected pattern (True when none is expected)."""
    from disagg_worker.transfer.agent import KVTransferAgent
    from disagg_worker.transfer.decode import Read
    from disagg_worker.transfer.peer_process import alloc, pattern, words
    from disagg_worker.transfer.peers import PeerRef

    mine = ask.cfg.model_copy(update={"tp_size": meta.tp_size, "tp_rank": rank})
    caches = alloc(layout, ask.cfg.device)
    with KVTransferAgent(mine, layout, caches, model_kv_heads=meta.model_kv_heads) as agent:
        peer = PeerRef(*ask.where)
        t0 = time.perf_counter()  # NIXL handshake incl. warm-up READ, as decode pays it
        got = agent.decode.peer_info(peer, timeout_s=ask.deadline)
        report.setdefault("handshake_ms", round((time.perf_counter() - t0) * 1000, 2))
        report.update(engine_id=got.engine_id, memory_type=got.memory_type, step="transfer")
        ids = list(range(layout.num_blocks))
        rid = f"probe-{uuid.uuid4().hex[:8]}"
        stats = agent.decode.read(Read(peer, rid, ids, ids, ask.deadline, claim=False))
    good = ask.expect_seed is None or all(
        bool((words(t)[b].cpu() == pattern(r, b, layout.block_len, ask.expect_seed)).all())
        for r, t in enumerate(caches)
        for b in ids
    )
    return stats, good


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        formatter_class=commandline.HelpFormatter,
        prog="disagg worker probe",
        description=__doc__.split("\n")[0],
    )
    p.add_argument("--peer", required=True, metavar="HOST:PORT", help="prefill side channel")
    p.add_argument("--engine-id", default="", help="expected engine id of the peer")
    p.add_argument("--blocks", type=int, default=4, help="blocks to read (default 4)")
    p.add_argument("--deadline-s", type=float, default=10.0, help="each step's deadline")
    p.add_argument(
        "--secret-file",
        metavar="PATH",
        help="the handshake secret (the deployment's Secret <name>-handshake, key hmac); "
        "default: $DISAGG_HMAC_SECRET_PATH, which a pod of the deployment has set",
    )
    p.add_argument("--expect-pattern", type=int, metavar="SEED", help=argparse.SUPPRESS)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    host, _, port = args.peer.rpartition(":")
    if not host or not port.isdigit():
        p.error("--peer takes HOST:PORT, e.g. 10.0.0.7:5600")
    try:
        cfg = WorkerConfig.from_env(
            os.environ, {"role": "decode", "hmac_secret_path": args.secret_file}
        )
    except ConfigError as e:
        print(f"disagg worker probe: {e}", file=sys.stderr)
        return 2
    report = probe(
        cfg,
        host.strip("[]"),
        int(port),
        engine_id=args.engine_id,
        blocks=args.blocks,
        deadline=args.deadline_s,
        expect_seed=args.expect_pattern,
    )
    if args.json:
        print(json.dumps(report))
    elif report["ok"]:
        print(
            f"ok: {report['peer']} ({report.get('engine_id')}) handshake "
            f"{report['handshake_ms']} ms, read {report['bytes']} B in "
            f"{report['transfer_ms']} ms ({report['gbps']} GB/s)"
        )
    else:
        hint = "" if cfg.hmac_secret_path else "; pass --secret-file PATH (or run it in a pod)"
        print(f"FAILED at {report['step']}: {report['peer']}: {report['error']}{hint}")
    return 0 if report["ok"] else 1
