"""The P/D protocol interface: how one engine's HTTP API is told to split a request.

The proxy (:mod:`disagg_worker.serve.proxy.flow`), the router it runs as and the transfer
canary (:mod:`disagg_worker.serve.canary`) call these methods and never name an engine's
fields, so a new engine adds a class, named by ``--pd-protocol``
(:func:`disagg_worker.serve.pd.resolve`) and rendered by its plugin (``Engine.pd_protocol``).
Sequential (vLLM's: prefill, handoff, decode) and concurrent (SGLang's bootstrap rooms:
``pair``) shapes: docs/architecture.md ("A new engine").
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
    """The request fields the proxy writes on both hops (a client sending one is refused
    before any hop)."""
    handoff_name: ClassVar[str] = "handoff"
    """The handoff's name in errors."""
    no_handoff: ClassVar[str] = "is it a prefill worker?"
    """Why a prefill may have returned no handoff, and what to check."""
    concurrent: ClassVar[bool] = False
    """True: both hops at once (:meth:`pair`), no handoff."""

    def pair(self, body: dict[str, Any], prefill_url: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """A concurrent protocol's two bodies, sent together: both name the prefill at
        ``prefill_url`` and one id the protocol makes (never the proxy)."""
        raise NotImplementedError

    def prefill(self, body: dict[str, Any]) -> dict[str, Any]:
        """The prefill hop's body: the client's, marked prefill-only."""
        raise NotImplementedError

    def handoff(self, answer: dict[str, Any]) -> Any | None:
        """What the prefill returned for decode (None: nothing); ValueError when it cannot
        be read (the flow answers 502 naming the prefill)."""
        raise NotImplementedError

    def decode(self, body: dict[str, Any], handoff: Any) -> dict[str, Any]:
        """The decode hop's body: told where the KV is."""
        raise NotImplementedError

    def local(self, body: dict[str, Any]) -> dict[str, Any]:
        """Decode alone, prefilling the prompt itself on purpose."""
        raise NotImplementedError

    def engine_rank(self, rank: int) -> dict[str, str] | None:
        """Headers that send a request to data-parallel engine ``rank`` of the pod it
        reaches (each engine has a side channel of its own); None: the engine cannot be
        told, so the canary cannot prove more than one."""
        return None

    def side_channel(self, handoff: Any) -> str | None:
        """Where ``handoff`` tells a decode to find the prefill's KV (``host:port``), None
        when it does not say."""
        return None

    def release(self, handoff: Any) -> tuple[str, dict[str, Any]] | None:
        """(path, body) that tells a prefill to free what it holds for a failed decode, or
        None when it has no such route."""
        return None

    def page(self, metrics_text: str) -> dict[str, float]:
        """What this protocol reads of a decode's /metrics (figures by name; {} when the
        engine exports none)."""
        return {}

    def recomputed(
        self, answer: dict[str, Any], before: Page | None = None, after: Page | None = None
    ) -> str | None:
        """Why a decode computed the prompt itself instead of reading the KV (None: it read
        it, or nothing says)."""
        return None

    def moved(
        self, answer: dict[str, Any], before: Page | None = None, after: Page | None = None
    ) -> Moved | None:
        """(bytes, seconds, via) of the KV that decode read."""
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
