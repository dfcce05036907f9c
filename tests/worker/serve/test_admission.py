"""Admission to the KV cache: waiting in order, bounded in number and time, and blocks
handed back from other threads reaching the waiters."""

from __future__ import annotations

import asyncio
import threading

import pytest

from disagg_worker.model.kvcache import BlockAllocator
from disagg_worker.serve.admission import Admission, Busy
from disagg_worker.serve.rules.openai import OpenAIError


def room(
    blocks: int = 8, waiting: int = 4, wait_s: float = 5.0
) -> tuple[Admission, BlockAllocator]:
    alloc = BlockAllocator(blocks)
    return Admission(alloc, max_waiting=waiting, wait_s=wait_s), alloc


async def test_free_blocks_are_taken_at_once() -> None:
    adm, alloc = room()
    assert await adm.allocate(3) == [0, 1, 2]
    assert alloc.num_free == 5 and adm.waiting == 0


async def test_a_request_that_can_never_fit_is_a_400_naming_the_prompt() -> None:
    adm, _ = room(blocks=4)
    with pytest.raises(OpenAIError) as err:
        await adm.allocate(5)
    assert (err.value.status, err.value.param) == (400, "prompt")
    assert "needs 5 KV blocks and this cache has 4" in err.value.message


async def test_waiters_are_served_first_come_first_served_as_blocks_come_back() -> None:
    adm, alloc = room()
    held = await adm.allocate(8)
    big = asyncio.ensure_future(adm.allocate(6))
    await asyncio.sleep(0)
    small = asyncio.ensure_future(adm.allocate(1))
    await asyncio.sleep(0.01)
    assert adm.waiting == 2 and not big.done() and not small.done()
    alloc.free(held[:4])  # not enough for the head: the small one behind it waits too
    await asyncio.sleep(0.01)
    assert not big.done() and not small.done()
    alloc.free(held[4:])
    assert len(await big) == 6 and len(await small) == 1
    assert adm.waiting == 0


async def test_blocks_freed_on_another_thread_wake_the_waiter() -> None:
    adm, alloc = room(blocks=2)
    held = await adm.allocate(2)
    waiter = asyncio.ensure_future(adm.allocate(2))
    await asyncio.sleep(0.01)
    threading.Thread(target=alloc.free, args=(held,)).start()  # the notification thread
    assert sorted(await asyncio.wait_for(waiter, 2.0)) == [0, 1]


async def test_a_full_waiting_room_is_busy_at_once_with_retry_after() -> None:
    adm, _ = room(blocks=2, waiting=1)
    await adm.allocate(2)
    first = asyncio.ensure_future(adm.allocate(1))
    await asyncio.sleep(0.01)
    with pytest.raises(Busy) as err:
        await adm.allocate(1)
    assert err.value.status == 503 and err.value.retry_after_s >= 1
    assert "1 requests already wait" in err.value.message
    first.cancel()


async def test_a_wait_past_the_bound_is_busy_and_leaves_the_queue() -> None:
    adm, alloc = room(blocks=2, wait_s=0.05)
    await adm.allocate(2)
    with pytest.raises(Busy, match=r"not free within 0\.05 s"):
        await adm.allocate(1)
    assert adm.waiting == 0 and alloc.num_free == 0


async def test_a_cancelled_waiter_leaves_and_takes_nothing() -> None:
    adm, alloc = room(blocks=2)
    held = await adm.allocate(2)
    gone = asyncio.ensure_future(adm.allocate(2))
    behind = asyncio.ensure_future(adm.allocate(1))
    await asyncio.sleep(0.01)
    gone.cancel()  # the client left while waiting
    await asyncio.sleep(0.01)
    alloc.free(held[:1])
    assert len(await asyncio.wait_for(behind, 1.0)) == 1
    assert alloc.num_free == 0 and adm.waiting == 0
