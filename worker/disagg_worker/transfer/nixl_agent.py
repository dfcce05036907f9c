"""NIXL agent lifecycle: backends, memory registration, prepared descriptor lists, peers.

I/O layer: the only module that calls the NIXL agent. It checks what NIXL merely warns
about (a requested backend that did not instantiate, or that cannot move the buffer's
memory type), registers each KV region (DRAM for cpu tensors, VRAM for cuda), prepares a
per-block descriptor list once for the local cache and once per remote peer, and tears
everything down in order: transfer handles → descriptor lists → remote agents →
deregistration. (Sockets belong to ``transfer`` and close after this.)

Two ways to post a READ, both kept because they trade differently (see docs/worker.md):
``prepped`` — indices into the prepared per-block lists (``make_prepped_xfer``; NIXL
coalesces adjacent indices unless asked not to); ``dynamic`` — the plan's descriptors
built per request (``initialize_xfer``), posted exactly as planned.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch

from disagg_worker.transfer.nixl_compat import backend_params, make_agent, nixl_api
from disagg_worker.transfer.rules.plan import IndexArray, TransferPlan

log = logging.getLogger(__name__)

PostMode = Literal["prepped", "dynamic"]
Op = Literal["READ", "WRITE"]
_WARM_BYTES = 256  # per region, read at handshake to set the connection up


class AgentError(RuntimeError):
    """NIXL set-up failed; the message names the backend or region and the fix."""


@dataclass
class RemotePeer:
    """A remote agent we loaded, with its prepared per-block descriptor list."""

    name: str
    region_addrs: list[int]
    block_len: int
    num_blocks: int
    device_id: int
    dlist: Any  # nixl_prepped_dlist_handle


def _tensor_device_id(t: torch.Tensor) -> int:
    return 0 if t.device.type == "cpu" else int(t.device.index or 0)


class NixlAgent:
    """One NIXL agent with its registered KV regions."""

    def __init__(
        self, name: str, backends: Sequence[str], memory_type: str, *, num_threads: int = 0
    ) -> None:
        self.name = name
        self.backends = list(backends)
        self.memory_type = memory_type
        self.threads = num_threads
        try:
            self._nixl = make_agent(name, threads=num_threads)
        except Exception as e:
            raise AgentError(
                f"DISAGG_BACKENDS: creating the NIXL agent with {self.backends} failed: "
                f"{type(e).__name__}: {e}"
            ) from e
        self._lock = threading.Lock()
        self._reg: Any = None
        self._local: Any = None
        self._handles: set[Any] = set()
        self._peers: dict[str, RemotePeer] = {}
        self.region_addrs: list[int] = []
        self.device_id = 0
        self.verify_backends()

    def verify_backends(self) -> None:
        """Each requested backend instantiated and supports the buffer's memory type."""
        plugins = list(self._nixl.get_plugin_list())
        for b in self.backends:
            if b not in self._nixl.backends:
                self._create(b, plugins)
            mems = [m.removesuffix("_SEG") for m in self._nixl.get_backend_mem_types(b)]
            if self.memory_type not in mems:
                raise AgentError(
                    f"DISAGG_BACKENDS: NIXL backend {b!r} cannot move {self.memory_type} "
                    f"memory here (it supports {', '.join(mems) or 'nothing'}); pick another "
                    "backend or change DISAGG_KV_BUFFER_DEVICE"
                )

    def _create(self, backend: str, plugins: list[str]) -> None:
        try:
            self._nixl.create_backend(backend, backend_params(backend, self.threads))
        except Exception as e:
            raise AgentError(
                f"DISAGG_BACKENDS: NIXL backend {backend!r} did not load "
                f"({type(e).__name__}: {e}); plugins available here: "
                f"{', '.join(sorted(plugins)) or 'none'}. Install its plugin or use one of them"
            ) from None

    # --- local memory ---------------------------------------------------------------

    def register(self, regions: Sequence[torch.Tensor], block_len: int, num_blocks: int) -> None:
        """Register the regions and prepare the local per-block descriptor list."""
        for i, t in enumerate(regions):
            if not t.is_contiguous():
                raise AgentError(f"KV region {i} is not contiguous; allocate it with .contiguous()")
            if t.numel() * t.element_size() != block_len * num_blocks:
                raise AgentError(
                    f"KV region {i} holds {t.numel() * t.element_size()} bytes, layout says "
                    f"{block_len * num_blocks} (num_blocks {num_blocks} x block_len {block_len})"
                )
        kind = "DRAM" if regions[0].device.type == "cpu" else "VRAM"
        if kind != self.memory_type:
            raise AgentError(
                f"KV regions are {kind} but the buffer device needs {self.memory_type}"
            )
        self.device_id = _tensor_device_id(regions[0])
        self.region_addrs = [t.data_ptr() for t in regions]
        self._reg = self._nixl.register_memory(list(regions))
        each = min(block_len, _WARM_BYTES)
        self._scratch = torch.empty(
            each * len(regions), dtype=torch.uint8, device=regions[0].device
        )
        self._scratch_reg = self._nixl.register_memory(self._scratch)
        self._local = self._nixl.prep_xfer_dlist(
            "NIXL_INIT_AGENT",
            _block_descs(self.region_addrs, block_len, num_blocks, self.device_id),
            self.memory_type,
        )

    def metadata(self) -> bytes:
        return bytes(self._nixl.get_agent_metadata())

    # --- peers ----------------------------------------------------------------------

    def add_peer(
        self,
        metadata: bytes,
        region_addrs: list[int],
        block_len: int,
        num_blocks: int,
        device_id: int,
    ) -> RemotePeer:
        """Load a remote agent and prepare its per-block list; connect eagerly."""
        name = self._nixl.add_remote_agent(metadata)
        name = name.decode() if isinstance(name, bytes) else str(name)
        try:
            dlist = self._nixl.prep_xfer_dlist(
                name,
                _block_descs(region_addrs, block_len, num_blocks, device_id),
                self.memory_type,
            )
            self._nixl.make_connection(name)
            peer = RemotePeer(name, list(region_addrs), block_len, num_blocks, device_id, dlist)
            self._warm_up(peer)
        except Exception:
            self._nixl.remove_remote_agent(name)
            raise
        with self._lock:
            self._peers[name] = peer
        return peer

    def _warm_up(self, peer: RemotePeer, timeout_s: float = 2.0) -> None:
        """READ a few bytes of every remote region into a scratch buffer: connection
        wire-up and remote keys are paid here, at handshake, not by the first request.
        It also proves the path works before a real request depends on it."""
        each = min(peer.block_len, _WARM_BYTES)
        base, slots = self._scratch.data_ptr(), max(1, self._scratch.numel() // each)
        # a peer may hold more regions than we do (more KV heads per rank): slots repeat
        local = [
            (base + (i % slots) * each, each, self.device_id) for i in range(len(peer.region_addrs))
        ]
        remote = [(a, each, peer.device_id) for a in peer.region_addrs]
        handle = self._nixl.initialize_xfer(
            "READ",
            self._nixl.get_xfer_descs(local, self.memory_type),
            self._nixl.get_xfer_descs(remote, self.memory_type),
            peer.name,
        )
        try:
            state = self.wait(handle, self._nixl.transfer(handle), time.perf_counter() + timeout_s)
        finally:
            _quietly(handle.release, "release warm-up handle")
        if state != "DONE":
            raise AgentError(f"warm-up READ from {peer.name} ended {state}")

    def remove_peer(self, peer: RemotePeer) -> None:
        with self._lock:
            self._peers.pop(peer.name, None)
        _quietly(peer.dlist.release, "release remote dlist")
        _quietly(lambda: self._nixl.remove_remote_agent(peer.name), "remove remote agent")

    # --- transfers ------------------------------------------------------------------

    def post_read(
        self,
        peer: RemotePeer,
        plan: TransferPlan,
        notif: bytes,
        *,
        mode: PostMode,
        merge: bool,
        part: tuple[IndexArray, IndexArray] | None = None,
        op: Op = "READ",
    ) -> tuple[Any, str]:
        """Create and post a READ (``op`` WRITE: the plan's local blocks into the peer's);
        returns (handle, first state "DONE"/"PROC"/"ERR").

        ``part``: (local, remote) index arrays, a slice of the plan's (prepped mode only).
        """
        if mode == "prepped":
            local_idx, remote_idx = part or (plan.local_indices(), plan.remote_indices())
            handle = self._nixl.make_prepped_xfer(
                op,
                self._local,
                local_idx,
                peer.dlist,
                remote_idx,
                notif,
                skip_desc_merge=not merge,
            )
        else:
            local = self._nixl.get_xfer_descs(
                plan.local_descs(self.region_addrs, self.device_id), self.memory_type
            )
            remote = self._nixl.get_xfer_descs(
                plan.remote_descs(peer.region_addrs, peer.device_id), self.memory_type
            )
            handle = self._nixl.initialize_xfer(op, local, remote, peer.name, notif)
        with self._lock:
            self._handles.add(handle)
        return handle, self._nixl.transfer(handle)

    def wait(self, handle: Any, state: str, deadline: float) -> str:
        """Poll until DONE/ERR or ``deadline`` (perf_counter); "PROC" means it was missed.
        Spins briefly, then backs off to 0.2 ms sleeps; an exception while polling is ERR."""
        delay = 0.0
        while state == "PROC":
            if time.perf_counter() >= deadline:
                return "PROC"
            time.sleep(delay)
            delay = min(0.0002, delay * 2 or 0.00002)
            try:
                state = self.state(handle)
            except Exception as e:
                log.debug("check_xfer_state: %s", e)
                return "ERR"
        return state

    def state(self, handle: Any) -> str:
        return str(self._nixl.check_xfer_state(handle))

    def descriptor_count(self, handle: Any, default: int) -> int:
        """Descriptors NIXL actually posted (after its own coalescing), if it says."""
        try:
            return int(self._nixl.get_xfer_telemetry(handle).descCount)
        except Exception:
            return default

    def release(self, handle: Any) -> bool:
        """Release a transfer handle (aborting it if active); False if NIXL refused."""
        with self._lock:
            self._handles.discard(handle)
        return _quietly(handle.release, "release transfer handle")

    def notifications(self) -> dict[str, list[bytes]]:
        return dict(self._nixl.get_new_notifs())

    def send_notif(self, peer_name: str, msg: bytes) -> None:
        self._nixl.send_notif(peer_name, msg)

    # --- shutdown -------------------------------------------------------------------

    def close(self) -> None:
        """Transfer handles → descriptor lists → remote agents → deregistration."""
        with self._lock:
            handles, self._handles = list(self._handles), set()
            peers, self._peers = list(self._peers.values()), {}
        for h in handles:
            _quietly(h.release, "release transfer handle")
        if self._local is not None:
            _quietly(self._local.release, "release local dlist")
            self._local = None
        for p in peers:
            _quietly(p.dlist.release, "release remote dlist")
        for p in peers:
            _quietly(lambda n=p.name: self._nixl.remove_remote_agent(n), "remove remote agent")
        if self._reg is not None:
            _quietly(lambda: self._nixl.deregister_memory(self._reg), "deregister memory")
            _quietly(lambda: self._nixl.deregister_memory(self._scratch_reg), "deregister scratch")
            self._reg = None


def _block_descs(addrs: Sequence[int], block_len: int, num_blocks: int, device_id: int) -> Any:
    """(address, length, device) for every block of every region, region-major."""
    import numpy as np

    base = np.asarray(addrs, dtype=np.uint64)[:, None]
    offs = (np.arange(num_blocks, dtype=np.uint64) * np.uint64(block_len))[None, :]
    out = np.empty((len(addrs) * num_blocks, 3), dtype=np.uint64)
    out[:, 0] = (base + offs).reshape(-1)
    out[:, 1] = block_len
    out[:, 2] = device_id
    return out


def _quietly(fn: Any, what: str) -> bool:
    try:
        fn()
        return True
    except Exception as e:
        log.warning("%s failed: %s: %s", what, type(e).__name__, e)
        return False


__all__ = ["AgentError", "NixlAgent", "Op", "PostMode", "RemotePeer", "nixl_api"]
