"""The toy engine's second P/D protocol, "rooms", in SGLang's shape: both hops at once.

The proxy sends the prefill and the decode their bodies together; both carry
``bootstrap_host`` and ``bootstrap_port`` (the prefill's bootstrap server) and
``bootstrap_room`` (a random 63-bit id this protocol draws, never the proxy). The decode
asks the prefill's bootstrap route for the room's KV and waits for it, bounded; the
prefill answers once a decode has claimed its room (:mod:`.server`).

Read from sglang's python/sglang/srt/disaggregation/mini_lb.py at commit
001c2ae0901cd353c26fed2f435887c867b73eed: ``MiniLoadBalancer.generate`` posts to both and
gathers them, answering the decode's; ``_forward_to_backend`` adds the three fields, the
host being the prefill URL's; ``_generate_bootstrap_room`` draws from [0, 2**63 - 1].
Unlike SGLang, whose bootstrap server has a port of its own
(``--disaggregation-bootstrap-port``), the toy's is its HTTP port; and the prefill is asked
for one token, not streamed (SGLang's prefill stops after its first token anyway).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any, ClassVar
from urllib.parse import urlsplit

from disagg_worker.serve.pd.base import one_token
from tests.support.toy_engine.pd import ToyEvidence

ROOM_BITS = 63
FIELDS = ("bootstrap_host", "bootstrap_port", "bootstrap_room")


def draw_room() -> int:
    return secrets.randbits(ROOM_BITS)


class Rooms(ToyEvidence):
    name: ClassVar[str] = "toy-rooms"
    owned: ClassVar[tuple[str, ...]] = FIELDS
    concurrent: ClassVar[bool] = True
    computed_why: ClassVar[str] = "the toy decode computed the prompt instead of its room's KV"

    def __init__(self, draw: Callable[[], int] = draw_room) -> None:
        self.draw = draw

    def pair(self, body: dict[str, Any], prefill_url: str) -> tuple[dict[str, Any], dict[str, Any]]:
        url = urlsplit(prefill_url)
        room = {
            "bootstrap_host": url.hostname,
            "bootstrap_port": url.port or (443 if url.scheme == "https" else 80),
            "bootstrap_room": self.draw(),
        }
        return {**one_token(body), **room}, {**body, **room}

    def local(self, body: dict[str, Any]) -> dict[str, Any]:
        return dict(body)  # no room: the decode computes the prompt, on purpose


PROTOCOL = Rooms()
