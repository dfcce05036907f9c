"""Transfer locality: which prefill and decode may be paired, by the zone each pod sits in
(``spec.routing.transferLocality``, the router's ``--transfer-locality``).

Pure, as its package. A KV transfer that crosses a zone is slow, billed, or over TCP where RDMA
cannot cross. Zones come from the EndpointSlices of the pools' Services (``endpoints[].zone``,
which Kubernetes copies from the node's ``topology.kubernetes.io/zone`` label). A pod with
no zone is in a zone-less group of its own: ``Preferred`` pairs within a group first and
falls back to any; ``Required`` never pairs across groups (a zoned prefill is never paired
with an unknown-zone decode). The decode-first planner's pick is kept first within its zone,
and prefills are ranked by the decode they can reach (docs/routing.md, Transfer locality).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

REQUIRED = "Required"
PREFERRED = "Preferred"
MODES = (REQUIRED, PREFERRED)
SERVICE_NAME = "kubernetes.io/service-name"  # the EndpointSlice's label naming its Service
UNKNOWN = ""  # a metric's zone label for the zone-less group

Zone = str | None  # None: the endpoint carries no zone


def zones_of(slices: Iterable[Mapping[str, Any]], services: Iterable[str]) -> dict[str, Zone]:
    """Address → zone from the EndpointSlices (discovery.k8s.io/v1) of ``services`` (their
    names); an address named twice keeps the zone it was last named with."""
    wanted = set(services)
    out: dict[str, Zone] = {}
    for piece in slices:
        labels = (piece.get("metadata") or {}).get("labels") or {}
        if labels.get(SERVICE_NAME) not in wanted:
            continue
        for endpoint in piece.get("endpoints") or []:
            zone = endpoint.get("zone")
            for address in endpoint.get("addresses") or []:
                out[str(address)] = zone if isinstance(zone, str) and zone else None
    return out


def check_mode(mode: str | None) -> None:
    """ValueError naming the flag when ``mode`` is not a locality mode (None: off)."""
    if mode is not None and mode not in MODES:
        raise ValueError(f"--transfer-locality: {mode!r} is not one of {', '.join(MODES)}")


def decode_order(mode: str, prefill: Zone, decodes: Sequence[Zone]) -> list[int]:
    """Indices of the decode candidates (their zones, in the caller's order: the planner's
    pick, then the pool's) that may read a prefill in zone ``prefill``, best first.
    Required: those in its zone (or its zone-less group) alone, possibly none;
    Preferred: those first, then every other, each part in the caller's order."""
    same = [i for i, z in enumerate(decodes) if z == prefill]
    if mode == REQUIRED:
        return same
    return same + [i for i, z in enumerate(decodes) if z != prefill]


def prefill_order(
    mode: str, prefills: Sequence[Zone], decodes: Iterable[Zone], planned: Iterable[Zone] = ()
) -> list[int]:
    """Indices of the prefill candidates (their zones, in the pool's order) best first, so
    that the decode the planner picked (``planned``: its zone; none when the pool picks)
    and then any decode can be reached without leaving a zone. Ranks: in the planned
    decode's zone; in a zone with a decode; the rest (Preferred only: Required drops them,
    possibly leaving none)."""
    reachable, first = set(decodes), set(planned)

    def rank(zone: Zone) -> int:
        if zone in first:
            return 0
        return 1 if zone in reachable else 2

    ranked = sorted(range(len(prefills)), key=lambda i: rank(prefills[i]))
    if mode == REQUIRED:
        return [i for i in ranked if rank(prefills[i]) < 2]
    return ranked


def named(zone: Zone) -> str:
    """A zone as a message or a metric names it."""
    return zone if zone is not None else UNKNOWN


def no_decode(zone: Zone, prefill: str) -> str:
    """The 503's message when no decode may read ``prefill`` (a URL) under Required."""
    where = f"zone {zone}" if zone is not None else "the zone-less group (no zone on its node)"
    return (
        f"no ready decode in {where} of prefill {prefill}; spec.routing.transferLocality "
        "Required pairs only within a zone: add decode pods there, or use Preferred"
    )


def no_pair(prefills: Iterable[Zone], decodes: Iterable[Zone]) -> str:
    """The 503's message when no prefill has a decode in its zone under Required."""

    def zones(of: Iterable[Zone]) -> str:
        return ", ".join(sorted({named(z) or "(none)" for z in of})) or "none"

    return (
        f"no zone has both a ready prefill and a ready decode (prefill zones: "
        f"{zones(prefills)}; decode zones: {zones(decodes)}); spec.routing.transferLocality "
        "Required pairs only within a zone: add pods, or use Preferred"
    )
