"""UCX transports and their reach: which ``UCX_TLS`` lists can carry KV between pods, and
the settings a pool that carries it over TCP runs UCX with.

The one table of UCX transport names and of the TCP settings. Readers: the
operator's validation of ``spec.kvTransfer.ucxTls`` (a list that cannot leave the host is
refused: prefill and decode always run in different pods), the platforms file (which
refuses transports that need privileges), the operator's derived pod env (``tcp_env``),
and docs/derivation.md (``markdown_table``, ``tcp_markdown_table``).

Reach: ``process`` moves memory inside one process (loopback, device↔host copies);
``host`` between processes of one machine, through shared memory, CMA or a device IPC
handle, which needs a shared IPC or PID namespace, or CAP_SYS_PTRACE, that two pods
never have; ``network`` between machines. Names are UCX 1.x ``UCX_TLS`` values; an alias
(``sm``, ``ib``, ``cuda``...) has the widest reach of its members. A name missing here
may be a network transport of a newer UCX, so it is never taken as host-only.
"""

from __future__ import annotations

from dataclasses import dataclass

PROCESS = "process"
HOST = "host"
NETWORK = "network"


@dataclass(frozen=True)
class Transport:
    name: str
    reach: str
    note: str


def _table(*rows: tuple[str, str, str]) -> dict[str, Transport]:
    return {name: Transport(name, reach, note) for name, reach, note in rows}


TRANSPORTS: dict[str, Transport] = _table(
    ("all", NETWORK, "every transport UCX finds (the default when UCX_TLS is unset)"),
    ("tcp", NETWORK, "TCP sockets"),
    ("ib", NETWORK, "alias: every InfiniBand/RoCE transport"),
    ("rc", NETWORK, "RDMA reliable connection (rc_verbs and rc_mlx5)"),
    ("rc_v", NETWORK, "rc over verbs"),
    ("rc_verbs", NETWORK, "rc over verbs"),
    ("rc_x", NETWORK, "rc with mlx5 accelerated verbs"),
    ("rc_mlx5", NETWORK, "rc with mlx5 accelerated verbs"),
    ("ud", NETWORK, "RDMA unreliable datagram"),
    ("ud_v", NETWORK, "ud over verbs"),
    ("ud_verbs", NETWORK, "ud over verbs"),
    ("ud_x", NETWORK, "ud with mlx5 accelerated verbs"),
    ("ud_mlx5", NETWORK, "ud with mlx5 accelerated verbs"),
    ("dc", NETWORK, "RDMA dynamically connected (mlx5)"),
    ("dc_x", NETWORK, "dc with mlx5 accelerated verbs"),
    ("dc_mlx5", NETWORK, "dc with mlx5 accelerated verbs"),
    ("srd", NETWORK, "AWS EFA scalable reliable datagram"),
    ("rdmacm", NETWORK, "RDMA connection manager"),
    ("sm", HOST, "alias: every shared-memory transport (mm, cma, knem, xpmem)"),
    ("shm", HOST, "alias of sm"),
    ("mm", HOST, "alias: posix, sysv and xpmem shared memory"),
    ("posix", HOST, "POSIX shared memory (/dev/shm)"),
    ("sysv", HOST, "System V shared memory (IPC namespace)"),
    ("xpmem", HOST, "XPMEM kernel module"),
    ("knem", HOST, "KNEM kernel module"),
    ("cma", HOST, "cross-memory attach (process_vm_readv: ptrace rights)"),
    ("cuda", HOST, "alias: cuda_copy, cuda_ipc and gdr_copy"),
    ("cuda_ipc", HOST, "CUDA IPC handles between processes of one host"),
    ("rocm", HOST, "alias: rocm_copy, rocm_ipc and rocm_gdr"),
    ("rocm_ipc", HOST, "ROCm IPC handles between processes of one host"),
    ("ze_ipc", HOST, "Level Zero IPC handles between processes of one host"),
    ("self", PROCESS, "loopback inside the process"),
    ("cuda_copy", PROCESS, "CUDA device↔host copies"),
    ("gdr_copy", PROCESS, "GDRCopy device↔host copies"),
    ("rocm_copy", PROCESS, "ROCm device↔host copies"),
    ("rocm_gdr", PROCESS, "ROCm GPUDirect device↔host copies"),
    ("ze_copy", PROCESS, "Level Zero device↔host copies"),
)


def names(tls: str) -> list[str]:
    """The transport names of a ``UCX_TLS`` value (an exclusion's ``^`` dropped)."""
    return [n.strip() for n in tls.removeprefix("^").split(",") if n.strip()]


def host_only(tls: str) -> bool:
    """True when ``tls`` is a plain list whose every transport is known and stays inside
    one host, so it cannot carry KV between two pods. ``^…`` (everything but) and ``all``
    keep network transports; an unknown name might be one."""
    listed = names(tls)
    if tls.startswith("^") or not listed:
        return False
    found = [TRANSPORTS.get(n) for n in listed]
    return all(t is not None and t.reach != NETWORK for t in found)


def host_only_names() -> list[str]:
    """Every name of reach process or host, sorted (the admission rule's alternatives)."""
    return sorted(n for n, t in TRANSPORTS.items() if t.reach != NETWORK)


def needs_privilege() -> frozenset[str]:
    """Transports that need CAP_SYS_PTRACE or an IPC namespace shared between pods:
    every host-reach name, and ``all``, which tries them."""
    return frozenset({"all", *(n for n, t in TRANSPORTS.items() if t.reach == HOST)})


def markdown_table() -> str:
    """The transport table in docs/derivation.md."""
    lines = ["| UCX_TLS name | reach | what it is |", "| --- | --- | --- |"]
    order = {NETWORK: 0, HOST: 1, PROCESS: 2}
    for t in sorted(TRANSPORTS.values(), key=lambda t: (order[t.reach], t.name)):
        lines.append(f"| `{t.name}` | {t.reach} | {t.note} |")
    return "\n".join(lines) + "\n"


# What an RDMA pool's UCX_TLS leads with: reliable connections, and unreliable datagrams for
# UCX's own wire-up between them.
RDMA_TLS = ("rc", "ud")


def rdma_tls(tls: str) -> str:
    """``tls`` (a platform's list) for a pool that must move KV over RDMA: rc and ud first,
    tcp dropped (a pod without its RDMA device then fails at the handshake instead of
    carrying KV over the CNI's TCP), the copy and self transports kept."""
    kept = [t for t in tls.split(",") if t and t != "tcp" and t not in RDMA_TLS]
    return ",".join([*RDMA_TLS, *kept])


@dataclass(frozen=True)
class Setting:
    name: str
    value: str
    default: str  # UCX 1.23's own value
    why: str


# UCX 1.23's receive segment: the largest active message a pod with UCX's defaults takes
DEFAULT_RX_SEG_SIZE = "64kb"

# UCX's tcp transport as a pool that moves KV over TCP runs it. NIXL's READ is a UCP GET, and
# tcp has no GET of its own (PUT only): UCP answers it in software, the target sending the
# bytes back as active messages of at most UCX_TCP_TX_SEG_SIZE each. At UCX's 8 KiB that is
# 512 messages for 4 MiB of KV, each a copy, a send() and a receive handler: measured between
# two pods, half the rate of 64 KiB segments (docs/derivation.md). The segment stops at the
# receive segment of a peer on UCX's defaults: a larger one fails that peer's READs (NIXL
# state ERR), and pools roll one at a time, a user's env may tune one pool only.
TCP_SETTINGS = (
    Setting(
        "UCX_TCP_TX_SEG_SIZE",
        DEFAULT_RX_SEG_SIZE,
        "8kb",
        "the largest active message a pod sends: a READ's reply goes in 64 KiB pieces, "
        "64 for 4 MiB of KV instead of 512; no larger than the receive segment of a peer "
        f"on UCX's defaults (`UCX_TCP_RX_SEG_SIZE`, `{DEFAULT_RX_SEG_SIZE}`)",
    ),
)


def tcp_env() -> dict[str, str]:
    """The UCX env of a pool that moves KV over TCP (:data:`TCP_SETTINGS`)."""
    return {s.name: s.value for s in TCP_SETTINGS}


def carries_tcp(tls: str) -> bool:
    """True when UCX may move data over tcp with ``tls``: tcp listed, ``all``, or an
    exclusion (``^…``) that leaves tcp in."""
    listed = names(tls)
    if tls.startswith("^"):
        return "tcp" not in listed
    return "tcp" in listed or "all" in listed


def tcp_markdown_table() -> str:
    """The TCP settings table in docs/derivation.md."""
    lines = ["| env | value | UCX default | why |", "| --- | --- | --- | --- |"]
    for s in TCP_SETTINGS:
        lines.append(f"| `{s.name}` | `{s.value}` | `{s.default}` | {s.why} |")
    return "\n".join(lines) + "\n"


# The wire a transport moves bytes on, as the transfer canary reports it and the operator's
# derivation expects it (docs/troubleshooting.md, UnexpectedTransport).
SHARED_MEMORY = "shared-memory"
TCP = "tcp"
RDMA = "rdma"
IN_PROCESS = "in-process"
UNKNOWN = "unknown"
WIRES = (SHARED_MEMORY, TCP, RDMA, IN_PROCESS, UNKNOWN)


def wire(transport: str) -> str:
    """The wire of a transport UCX names in its protocol report (``cma``, ``tcp``,
    ``rc_mlx5``...): tcp, rdma (any other network transport), shared-memory (host reach:
    shared memory, CMA, a device IPC handle), in-process, or unknown (a name this table
    lacks)."""
    if transport == "tcp":
        return TCP
    found = TRANSPORTS.get(transport)
    if found is None:
        return UNKNOWN
    return {NETWORK: RDMA, HOST: SHARED_MEMORY, PROCESS: IN_PROCESS}[found.reach]


def wires_of(tls: str) -> frozenset[str]:
    """The wires a ``UCX_TLS`` value lets UCX use between processes: those of its names
    (``all`` and an exclusion, ``^…``, leave every wire the exclusion does not name)."""
    listed = names(tls)
    if tls.startswith("^") or "all" in listed or not listed:
        dropped = {wire(n) for n in listed} if tls.startswith("^") else set()
        kept = {TCP, RDMA, SHARED_MEMORY} - (dropped & {TCP})
        return frozenset(kept)
    return frozenset(wire(n) for n in listed) - {IN_PROCESS}
