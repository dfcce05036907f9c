"""Transfer locality's rules (:mod:`disagg_worker.serve.proxy.rules.locality`): the zones read
from EndpointSlices, the decodes a prefill may pair with, and the prefills ranked by the
decodes their zone holds."""

from __future__ import annotations

from typing import Any

import pytest

from disagg_worker.serve.proxy.rules.locality import (
    PREFERRED,
    REQUIRED,
    check_mode,
    decode_order,
    no_decode,
    no_pair,
    prefill_order,
    zones_of,
)


def _slice(service: str, *endpoints: tuple[str, str | None]) -> dict[str, Any]:
    """An EndpointSlice of ``service`` whose endpoints are (address, zone or None)."""
    return {
        "metadata": {"name": f"{service}-x", "labels": {"kubernetes.io/service-name": service}},
        "endpoints": [
            {"addresses": [ip], **({"zone": zone} if zone is not None else {})}
            for ip, zone in endpoints
        ],
    }


def test_zones_are_read_from_the_named_services_slices_only() -> None:
    slices = [
        _slice("demo-prefill", ("10.0.0.1", "zone-a"), ("10.0.0.2", None)),
        _slice("demo-decode", ("10.0.0.3", "zone-b")),
        _slice("other", ("10.0.0.9", "zone-c")),
        {"metadata": {"name": "unlabelled"}, "endpoints": [{"addresses": ["10.0.0.8"]}]},
    ]
    got = zones_of(slices, ["demo-prefill", "demo-decode"])
    assert got == {"10.0.0.1": "zone-a", "10.0.0.2": None, "10.0.0.3": "zone-b"}


def test_an_empty_zone_is_no_zone() -> None:
    assert zones_of([_slice("s", ("10.0.0.1", ""))], ["s"]) == {"10.0.0.1": None}


# (mode, prefill zone, decode zones in the caller's order, indices kept best first)
DECODES = [
    (REQUIRED, "a", ["b", "a", "a"], [1, 2]),
    (REQUIRED, "a", ["b", None], []),  # a zoned prefill never pairs with an unknown zone
    (REQUIRED, None, ["a", None], [1]),  # the zone-less group pairs within itself
    (REQUIRED, "a", [], []),
    (PREFERRED, "a", ["b", "a", None, "a"], [1, 3, 0, 2]),
    (PREFERRED, "a", ["b", "c"], [0, 1]),  # none in its zone: any, in the caller's order
    (PREFERRED, None, ["a", None], [1, 0]),
]


@pytest.mark.parametrize(("mode", "zone", "decodes", "kept"), DECODES)
def test_decode_order(mode: str, zone: str | None, decodes: list[Any], kept: list[int]) -> None:
    assert decode_order(mode, zone, decodes) == kept


def test_the_planners_pick_stays_first_within_its_zone() -> None:
    # the caller's order is the planner's (its prefix-affinity pick first): kept in a zone
    assert decode_order(PREFERRED, "a", ["a", "b", "a"])[0] == 0
    assert decode_order(REQUIRED, "b", ["a", "b", "b"]) == [1, 2]


# (mode, prefill zones in the pool's order, decode zones, the planned decode's zone, order)
PREFILLS: list[tuple[str, list[Any], list[Any], list[Any], list[int]]] = [
    (REQUIRED, ["a", "b", "c"], ["b"], [], [1]),
    (REQUIRED, ["a", "b"], ["a", "b"], ["b"], [1, 0]),  # the planned decode's zone first
    (REQUIRED, ["a"], ["b"], [], []),
    (REQUIRED, ["a", None], [None], [], [1]),
    (PREFERRED, ["a", "b", "c"], ["c"], [], [2, 0, 1]),
    (PREFERRED, ["a", "b", "c"], ["b", "c"], ["c"], [2, 1, 0]),
    (PREFERRED, ["a"], ["b"], [], [0]),  # falls back across zones
]


@pytest.mark.parametrize(("mode", "prefills", "decodes", "planned", "order"), PREFILLS)
def test_prefill_order(
    mode: str, prefills: list[Any], decodes: list[Any], planned: list[Any], order: list[int]
) -> None:
    assert prefill_order(mode, prefills, decodes, planned) == order


def test_refusals_name_the_zone_the_field_and_the_fix() -> None:
    text = no_decode("zone-a", "http://10.0.0.1:8000")
    assert "zone zone-a" in text and "http://10.0.0.1:8000" in text
    assert "spec.routing.transferLocality" in text and "Preferred" in text
    assert "zone-less" in no_decode(None, "http://10.0.0.1:8000")
    text = no_pair(["zone-a", None], ["zone-b"])
    assert "prefill zones: (none), zone-a" in text and "decode zones: zone-b" in text


def test_an_unknown_mode_names_the_flag() -> None:
    check_mode(None)
    check_mode(REQUIRED)
    with pytest.raises(ValueError, match="--transfer-locality: 'required'"):
        check_mode("required")
