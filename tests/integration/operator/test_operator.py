"""The real kopf operator over HTTP against the API emulator: the reconcile behaviours."""

from __future__ import annotations

import asyncio

from tests.integration.emulator import Emulator
from tests.integration.operator.conftest import DD_PATH, NS, api, pods, quickstart, until


async def test_apply_creates_children_with_expected_config(
    emulator: Emulator, operator: asyncio.Task[None]
) -> None:
    created = await api(emulator, "POST", DD_PATH, quickstart())
    got = await until("both pods", lambda: len(pods(emulator)) == 2 and pods(emulator))
    assert sorted(got) == ["demo-decode-0", "demo-prefill-0"]
