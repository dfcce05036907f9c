"""The P/D protocol interface: how one engine's HTTP API is told to split a request.

The proxy (:mod:`disagg_worker.serve.proxy.flow`), the router it runs as and the transfer
canary (:mod:`disagg_worker.serve.canary`) call these methods and never name an engine's
fields: each engine's protocol is a class like this one, named on their command lines by
``--pd-protocol`` (:func:`disagg_worker.serve.pd.resolve`) and rendered there by the engine
plugin (``Engine.pd_protocol``).

Two shapes. A sequential protocol (vLLM's) runs the prefill hop, reads what it answered
and then sends the decode hop: ``prefill``, ``handoff``, ``decode``. A ``concurrent`` one
(SGLang's bootstrap rooms) sends both hops at once, each told where the other is before
either answers (``pair``); the decode waits for its KV on the engines' own side channel.

What each method answers:

    concurrent                       True: both hops at once (``pair``), no handoff
    pair(body, prefill_url)          a concurrent protocol's two bodies, sent together: both
                                     name the prefill at ``prefill_url`` and one id the
                                     protocol makes (never the proxy)
    owned                            the request fields the proxy writes on both hops
                                     (a client sending one is refused before any hop)
    prefill(body)                    the prefill hop's body: the client's, marked prefill-only
    handoff(answer)                  what the prefill returned for decode (None: nothing;
                                     ValueError when it cannot be read: the flow answers
                                     502 naming the prefill)
    handoff_name, no_handoff         its name in errors; why a prefill may have returned
                                     none, and what to check
    decode(body, handoff)            the decode hop's body: told where the KV is
    local(body)                      decode alone, prefilling the prompt itself on purpose
    release(handoff)                 (path, body) that tells a prefill to free what it holds
                                     for a failed decode, or None when it has no such route
    page(metrics_text)               what this protocol reads of a decode's /metrics
                                     (figures by name; {} when the engine exports none)
    recomputed(answer, before, after)  why a decode computed the prompt itself instead of
                                     reading the KV (None: it read it, or nothing says)
    moved(answer, before, after)     (bytes, seconds, via) of the KV that decode read
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

Page = Mapping[str, float]  # what a protocol reads of a decode's /metrics, by name
Moved = tuple[float, float, str]  # bytes, seconds on the wire, where the figure came from


class PdProtocol:
    """One engine's P/D convention over its OpenAI-style HTTP API."""

    name: ClassVar[str]
    owned: ClassVar[tuple[str, ...]] = ()
    handoff_name: ClassVar[str] = "handoff"
    no_handoff: ClassVar[str] = "is it a prefill worker?"
    concurrent: ClassVar[bool] = False

    def pair(self, body: dict[str, Any], prefill_url: str) -> tuple[dict[str, Any], dict[str, Any]]:
        raise NotImplementedError

    def prefill(self, body: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def handoff(self, answer: dict[str, Any]) -> Any | None:
        raise NotImplementedError

    def decode(self, body: dict[str, Any], handoff: Any) -> dict[str, Any]:
        raise NotImplementedError

    def local(self, body: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def release(self, handoff: Any) -> tuple[str, dict[str, Any]] | None:
        return None

    def page(self, metrics_text: str) -> dict[str, float]:
        return {}

    def recomputed(
        self, answer: dict[str, Any], before: Page | None = None, after: Page | None = None
    ) -> str | None:
        return None

    def moved(
        self, answer: dict[str, Any], before: Page | None = None, after: Page | None = None
    ) -> Moved | None:
        return None


def one_token(body: dict[str, Any]) -> dict[str, Any]:
    """The client's request for one token, whole (vLLM's toy P/D proxy asks a prefill this
    way): no streaming, and no minimum lengths, which a one-token request cannot honour."""
    first = {**body, "max_tokens": 1, "stream": False}
    if "max_completion_tokens" in first:
        first["max_completion_tokens"] = 1
    for key in ("stream_options", "min_tokens", "min_completion_tokens"):
        first.pop(key, None)
    return first
