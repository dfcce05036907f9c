"""The installed vLLM against its row of the KV events table (engines/vllm/event_rows.py):
vLLM's own modules are the judge (no server). The ZMQ publisher is registered, sha256_cbor
is a prefix-caching hash algorithm, the events are tagged arrays or maps as the row says,
the unset-seed root and the prefix-hit reports are there where the row says."""

from __future__ import annotations

import inspect
import typing

import pytest

from disagg_operator.engines.vllm import contract as profiles
from disagg_operator.engines.vllm import event_rows

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def row() -> event_rows.EventsRow:
    """The events row of the installed vLLM (imported here, never at collection)."""
    import vllm

    found = event_rows.events_row(profiles.parse_version(vllm.__version__))
    assert found is not None
    return found


def test_the_publisher_and_hash_algo_are_there(row: event_rows.EventsRow) -> None:
    from vllm.config.cache import PrefixCachingHashAlgo
    from vllm.distributed.kv_events import EventPublisherFactory, ZmqEventPublisher

    assert (EventPublisherFactory._registry.get("zmq") is ZmqEventPublisher) == row.publisher
    assert ("sha256_cbor" in typing.get_args(PrefixCachingHashAlgo)) == row.sha256_cbor
    assert row.missing() == []


def test_the_events_are_tagged_as_the_row_says(row: event_rows.EventsRow) -> None:
    from vllm.distributed.kv_events import BlockStored, EventBatch

    assert BlockStored.__struct_config__.tag == "BlockStored"
    assert BlockStored.__struct_config__.array_like == (row.wire == event_rows.ARRAY)
    assert EventBatch.__struct_config__.array_like  # [ts, events, data_parallel_rank]


def test_the_unset_root_and_hit_reports_are_as_the_row_says(row: event_rows.EventsRow) -> None:
    from vllm.v1.core import kv_cache_manager, kv_cache_utils

    fixed = getattr(kv_cache_utils, "DEFAULT_NONE_HASH_SEED", None)
    assert (fixed == "vllm-none-hash") == (row.unset_root != event_rows.RANDOM_ROOT)
    reports = "kv_cache_report_mode" in inspect.getsource(kv_cache_manager)
    assert reports == row.reuse_reports
