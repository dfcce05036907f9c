"""What UCX says it chose: its protocol report (``UCX_PROTO_INFO=y``) read as data.

UCX (1.23 in nixl-cu12 1.5.1) prints one table per endpoint configuration and
operation when it first selects protocols for them: a title naming the worker, UCX's name
for where the peer is (``self``, ``intra-node``: same host and namespaces, ``inter-node``:
anything else) and ``cfg#N``, then the operation ("remote memory read by ucp_get*..."), then
one row per message-size range: range, protocol ("zero-copy", "software emulation"...),
and the transports as ``transport/device`` ("cma/memory", "tcp/eth0", "rc_mlx5/mlx5_0:1",
or "50% on A and 50% on B" for several lanes). NIXL's READ is a UCP GET, so the remote
memory read table of a non-self endpoint names the wire the KV took. Lines that are not
part of a table (NIXL's own log lines, a UCX warning) are skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# UCX's endpoint configuration names (ucp_ep_config name in the table title)
SELF = "self"
INTRA_NODE = "intra-node"
INTER_NODE = "inter-node"
READ = "remote memory read"  # how UCX describes a ucp_get*, the operation NIXL's READ posts

_PREFIX = re.compile(r"^\[[^\]]*\]\s+\[[^\]]*\]\s+")  # "[1796662730.55] [vm:7248 :0]"
_TITLE = re.compile(r"^(?P<worker>.*?)\s*(?P<scope>\S+) cfg#(?P<n>\d+)$")
_LANE = re.compile(r"(?P<transport>[A-Za-z][\w]*)/(?P<device>[\w.:\-]+)")


@dataclass(frozen=True)
class Row:
    """One size range of a selection: ``span`` ("0..inf"), ``protocol`` ("zero-copy"),
    ``config`` (the transports, as UCX prints them)."""

    span: str
    protocol: str
    config: str

    def lanes(self) -> tuple[tuple[str, str], ...]:
        """(transport, device) of every lane the row names."""
        return tuple((m["transport"], m["device"]) for m in _LANE.finditer(self.config))


@dataclass(frozen=True)
class Selection:
    """One table: the protocols UCX selected for ``operation`` toward peers in ``scope``."""

    worker: str
    scope: str
    config: int
    operation: str
    rows: tuple[Row, ...]

    def transports(self) -> tuple[str, ...]:
        """The transports its rows name, first seen first."""
        seen = dict.fromkeys(t for row in self.rows for t, _ in row.lanes())
        return tuple(seen)


def _row(line: str) -> tuple[str, list[str]] | None:
    """(the line's log prefix, its cells) for a table row (``| a | b |``); None for
    anything else, borders included. UCX prints a whole table under one prefix (one
    timestamp), so the prefix tells where a table ends."""
    prefix = _PREFIX.match(line)
    body = line[prefix.end() :].strip() if prefix else line.strip()
    if len(body) < 2 or not (body.startswith("|") and body.endswith("|")):
        return None
    return (prefix.group(0) if prefix else "", [c.strip() for c in body[1:-1].split("|")])


def selections(text: str) -> list[Selection]:
    """Every protocol table in ``text`` (a UCX log), in order."""
    groups: list[tuple[str, list[list[str]]]] = []
    for line in text.splitlines():
        found = _row(line)
        if found is None:
            continue
        prefix, cells = found
        new_title = len(cells) == 1 and groups and len(groups[-1][1][-1]) > 1
        if not groups or groups[-1][0] != prefix or new_title:
            groups.append((prefix, []))
        groups[-1][1].append(cells)
    tables = (_table(rows) for _, rows in groups)
    return [t for t in tables if t is not None]


def _table(rows: list[list[str]]) -> Selection | None:
    """The selection a run of rows makes: title, operation, header, ranges."""
    if len(rows) < 3 or len(rows[0]) != 1 or len(rows[1]) != 1:
        return None
    title = _TITLE.match(rows[0][0])
    header = [c.lower() for c in rows[2]]
    if title is None or header[:1] != ["range"]:
        return None
    ranges = tuple(Row(*r[:3]) for r in rows[3:] if len(r) >= 3)
    return Selection(title["worker"], title["scope"], int(title["n"]), rows[1][0], ranges)


@dataclass(frozen=True)
class Chosen:
    """The wire of a READ toward a peer: where UCX saw the peer (``scope``), the
    transports and devices, and the protocols of its size ranges."""

    scope: str
    transports: tuple[str, ...]
    devices: tuple[str, ...]
    protocols: tuple[str, ...]

    def describe(self) -> str:
        """E.g. ``cma/memory zero-copy (intra-node)``."""
        lanes = ", ".join(f"{t}/{d}" for t, d in zip(self.transports, self.devices, strict=True))
        return f"{lanes} {' + '.join(self.protocols)} ({self.scope})"


def chosen_read(text: str) -> Chosen | None:
    """What UCX chose for the last READ toward another process (its newest non-self
    remote-memory-read table); None when the report holds none (UCX_PROTO_INFO unset,
    or no READ reached the wire)."""
    reads = [s for s in selections(text) if s.operation.startswith(READ) and s.scope != SELF]
    if not reads:
        return None
    last = reads[-1]
    lanes = dict.fromkeys(lane for row in last.rows for lane in row.lanes())
    protocols = dict.fromkeys(row.protocol for row in last.rows)
    return Chosen(
        scope=last.scope,
        transports=tuple(t for t, _ in lanes),
        devices=tuple(d for _, d in lanes),
        protocols=tuple(protocols),
    )
