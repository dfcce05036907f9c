"""The proxy's routing step: a request's tokens counted by the engine, the decode worker
that likely holds its prefix, and its path under the policy (:mod:`.routing`).

I/O layer (one HTTP call, ``POST /tokenize`` on a decode worker, through the proxy's own
hop; the decisions are :mod:`.routing`'s, pure). Nothing is asked when the policy needs no
tokens (``always`` without a decode prefix cache): no cost on the default path. With
``--prefix-index events`` what each decode holds is what its engine's KV events say
(:mod:`.kv_subscriber`), its approximate entry while its stream is not whole.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from disagg_worker.serve.proxy.kv_subscriber import KvSubscriber
from disagg_worker.serve.proxy.metrics import ProxyMetrics
from disagg_worker.serve.proxy.revisions import Pair, Pairs
from disagg_worker.serve.proxy.rules.kv_events import NO_STREAM, Hashing, hit_tokens
from disagg_worker.serve.proxy.rules.routing import (
    UNCOUNTED,
    Policy,
    PrefixIndex,
    Route,
    affinity_order,
    block_hashes,
    decide,
)
from disagg_worker.serve.proxy.upstream import Backend, HopError, Pool, Request
from disagg_worker.serve.rules.openai import TOKENIZE_PATH, is_int

log = logging.getLogger("disagg.proxy")
TOKENIZE_TIMEOUT_S = 5.0
# what a tokenize request carries of a chat request (vLLM's TokenizeChatRequest fields)
CHAT_TOKENIZE_KEYS = ("messages", "chat_template", "chat_template_kwargs", "tools",
                      "add_generation_prompt", "continue_final_message")  # fmt: skip
Post = Callable[[str, str, dict[str, Any], dict[str, str], float], Awaitable[dict[str, Any]]]


@dataclass
class Plan:
    """A request's route, the KV revision's pools that serve it, the decode worker it
    should go to (None: the pool's pick) and its prompt's block hashes (recorded on that
    decode once it answers)."""

    route: Route
    pair: Pair
    decode: Backend | None = None
    hashes: list[bytes] = field(default_factory=list)


class Planner:
    """The policy, the prefix index over the decode workers, and the tokenize call."""

    def __init__(self, policy: Policy, pairs: Pairs, post: Post, metrics: ProxyMetrics) -> None:
        """``pairs``: the pools of each KV revision (:mod:`.revisions`); ``post(role, url,
        body, headers, deadline)``: the proxy's JSON hop; ``metrics``: where a prompt that
        could not be counted is."""
        self.policy, self.pairs, self._post = policy, pairs, post
        self.metrics = metrics
        self.index = PrefixIndex(policy.index_blocks)
        self.events: KvSubscriber | None = None
        if policy.prefix_index == "events":
            hashing = Hashing(policy.hash_algo, policy.hash_seed, policy.block_tokens)
            self.events = KvSubscriber(hashing, policy.kv_events_port, policy.kv_events_topic,
                                       lambda: [b.url for b in pairs.decodes],
                                       dict(policy.kv_events_endpoints))  # fmt: skip

    async def start(self) -> None:
        if self.events is not None:
            await self.events.start()

    async def close(self) -> None:
        if self.events is not None:
            await self.events.close()

    def answered(self, plan: Plan, decode: Backend) -> None:
        """``decode`` answered the request: it now holds the prompt's blocks."""
        if plan.hashes:
            self.index.record(decode.url, plan.hashes)
            self.index.keep(b.url for b in self.pairs.decodes)

    async def plan(self, req: Request) -> Plan:
        """The request's route under the policy, inside the KV revision :mod:`.revisions`
        picks: its tokens counted by the engine when the policy needs them, the decode
        holding its longest prefix, the prefills' load."""
        policy, pair = self.policy, self.pairs.choose()
        if not policy.needs_tokens:
            return Plan(decide(policy, None, 0, ()), pair)
        tokens = await self._tokens(req, pair.decode)
        if tokens is None:
            self.metrics.uncounted()
            return Plan(Route("pd", UNCOUNTED), pair)
        hashes = block_hashes(tokens, policy.block_tokens) if policy.prefix_cache else []
        backends = pair.decode.backends
        best, cached = None, 0
        if hashes and backends:
            matched = self._matched(backends, tokens, hashes)
            i = affinity_order([b.inflight for b in backends], matched)[0]
            if matched[i]:  # else no decode holds any of it: the pool's own pick
                best, cached = backends[i], matched[i]
        loads = [b.inflight for b in pair.prefill.backends]
        return Plan(decide(policy, len(tokens), cached, loads), pair, best, hashes)

    def _matched(
        self, backends: list[Backend], tokens: list[int], hashes: list[bytes]
    ) -> list[int]:
        """The prompt tokens each decode holds: by its own KV events where its stream is
        whole, else by the approximate index (the fallback counted once per request, by
        the first loss seen, else ``no_stream``)."""
        block = self.policy.block_tokens
        approx = [self.index.matched(b.url, hashes) * block for b in backends]
        if self.events is None:
            return approx
        chain = self.events.hashing.chain(tokens)
        out, reason = [], None
        for b, fallback in zip(backends, approx, strict=True):
            engine = self.events.engine(b.url)
            lost = NO_STREAM if engine is None else engine.lost
            if engine is None or lost is not None:
                reason = lost if reason in (None, NO_STREAM) else reason  # a loss over silence
                out.append(fallback)
            else:
                out.append(hit_tokens(engine.matched(chain), len(tokens), block))
        if reason is not None:
            self.metrics.index_fallback(reason)
        return out

    async def _tokens(self, req: Request, decode: Pool) -> list[int] | None:
        """The prompt's tokens: given as ids, or counted by a decode worker's /tokenize
        (vLLM's endpoint: the engine's own tokenizer and chat template). None when it
        cannot say (no decode, an error, an old engine)."""
        body = req.body
        if not req.path.endswith("chat/completions"):
            prompt = body.get("prompt")
            if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], list):
                prompt = prompt[0]
            if isinstance(prompt, list) and prompt and all(is_int(t) for t in prompt):
                return list(prompt)
            ask = {"model": body.get("model"), "prompt": prompt}
        else:
            ask = {k: body[k] for k in ("model", *CHAT_TOKENIZE_KEYS) if k in body}
        ask = {k: v for k, v in ask.items() if v is not None}
        if not decode.backends:
            return None
        # the least busy decode counts them; not the pool's pick, whose turn it would take
        url = min(decode.backends, key=lambda b: b.inflight).url + TOKENIZE_PATH
        left = min(req.deadline - time.monotonic(), TOKENIZE_TIMEOUT_S)
        try:
            out = await self._post("tokenize", url, ask, req.headers, time.monotonic() + left)
        except HopError as e:
            log.debug("could not count the prompt's tokens: %s", e)
            return None
        tokens = out.get("tokens")
        if isinstance(tokens, list) and all(is_int(t) for t in tokens):
            return tokens
        return None
