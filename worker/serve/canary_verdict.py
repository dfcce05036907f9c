"""Transfer-path canary: when a canary is due, what its answers prove, and the verdict.

Pure layer of ``disagg worker canary`` (:mod:`disagg_worker.serve.canary` does the HTTP).
One canary is the P/D request pair any client makes through the engine's own API: a
prefill with ``max_tokens 1`` that returns ``kv_transfer_params``, then a decode in this pod
with them. It passes when both hops answer 200 and the decode returns a token; the decode
can only do that after reading the prefill's KV, so a pass proves the whole transfer path
(DNS, the side channel, the KV transport, both engines) at that moment.

Timing (numbers and why: docs/derivation.md): a probe runs a canary when the last one is
at least ``interval_s`` old and none is running, else it reuses the last result; the
verdict is ready only while the last canary passed and is at most ``fresh_s`` old.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from disagg_worker.serve.proxy.evidence import recompute_reason, vllm_recomputed

# A short fixed text: a few tokens for any tokenizer, one KV block for any block size.
PROMPT = "The transfer path works."


@dataclass(frozen=True)
class Result:
    """One canary's outcome: ``at`` (monotonic seconds) when it ended, ``problem`` None when
    it passed, else what failed (which hop, which URL, why)."""

    at: float
    took_ms: float
    problem: str | None = None

    @property
    def passed(self) -> bool:
        return self.problem is None


@dataclass(frozen=True)
class Verdict:
    """What ``GET /ready`` answers: ``ready`` (200) or not (503), and why."""

    ready: bool
    reason: str


def request_body(model: str) -> dict[str, Any]:
    """The canary request; the P/D client (the proxy) turns it into the two hops."""
    return {"model": model, "prompt": PROMPT, "max_tokens": 1}


def due(last: Result | None, now: float, interval_s: float) -> bool:
    """A new canary runs when there is none yet or the last ended ``interval_s`` ago."""
    return last is None or now - last.at >= interval_s


RECOMPUTED = "DecodeRecomputing"


def kv_problem(
    answer: dict[str, Any],
    before: Mapping[str, float] | None = None,
    after: Mapping[str, float] | None = None,
) -> str | None:
    """None unless decode computed the prompt itself instead of reading the prefill's KV:
    correct tokens, but no P/D. The reference worker says so in its answer; vLLM only in
    its prompt-token sources (``before`` and ``after`` the request, from its /metrics:
    :mod:`~disagg_worker.serve.proxy.evidence`). The message starts with
    :data:`RECOMPUTED`, the reason the canary reports."""
    if recompute_reason(answer) is not None:
        return (
            f"{RECOMPUTED}: decode computed the prompt itself instead of reading its KV "
            "from the prefill (the kv_transfer_params did not reach it)"
        )
    if before is not None and after is not None and vllm_recomputed(before, after):
        return (
            f"{RECOMPUTED}: decode computed the canary's prompt itself (its "
            "vllm:prompt_tokens_by_source_total grew in local_compute, not "
            "external_kv_transfer): its KV connector did not load the prefill's KV"
        )
    return None


def token_problem(answer: dict[str, Any]) -> str | None:
    """None when decode's answer carries a generated token (vLLM: usage.completion_tokens or
    the choice's text; the reference worker also gives token_ids), else what is missing."""
    choices = answer.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return "decode answered 200 without choices"
    choice = choices[0]
    usage = answer.get("usage")
    counted = isinstance(usage, dict) and (usage.get("completion_tokens") or 0) >= 1
    if counted or choice.get("token_ids") or choice.get("text"):
        return None
    return "decode answered 200 but generated no token"


def verdict(last: Result | None, now: float, fresh_s: float) -> Verdict:
    """Ready while the last canary passed and ended at most ``fresh_s`` ago."""
    if last is None:
        return Verdict(False, "no canary has completed yet")
    if not last.passed:
        return Verdict(False, f"the last canary failed: {last.problem}")
    age = now - last.at
    if age > fresh_s:
        return Verdict(
            False, f"the last passing canary is {age:.0f} s old (fresh for {fresh_s:g} s)"
        )
    return Verdict(True, f"the last canary passed {age:.0f} s ago in {last.took_ms:.0f} ms")


def flipped(before: Result | None, after: Result) -> bool:
    """The verdict changes between two canaries: the one moment worth a log line (the
    first result always counts, so the log says where the pod starts)."""
    return before is None or before.passed != after.passed
