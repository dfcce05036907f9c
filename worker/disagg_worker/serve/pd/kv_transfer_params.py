"""vLLM's P/D convention, ``kv_transfer_params``: the protocol of ``vllm serve`` with the
NixlConnector and of the reference worker, which speaks it too.

1. prefill: the client's body with ``max_tokens: 1`` (and ``max_completion_tokens: 1`` when
   sent), ``stream: false`` and
   ``kv_transfer_params: {do_remote_decode: true, do_remote_prefill: false, remote_*: null}``;
2. decode: the client's body with the prefill answer's ``kv_transfer_params``; decode
   alone: ``{do_remote_prefill: false, do_remote_decode: false}``, which says it prefills
   on purpose (the worker counts no fallback);
3. release: the prefill's own ``kv_transfer_params`` posted back to ``/v1/kv/release`` (the
   reference worker frees the blocks now; vLLM answers 404 and keeps its lease).

Evidence (:mod:`.evidence`): the reference worker's answer says where the KV came from and
how fast it moved; vLLM says so only on its ``/metrics``, read before and after a request.
"""

from __future__ import annotations

from typing import Any, ClassVar

from disagg_contract import pd
from disagg_worker.serve.pd.base import Moved, Page, PdProtocol, one_token
from disagg_worker.serve.pd.evidence import (
    answer_transfer,
    recompute_reason,
    vllm_recomputed,
    vllm_sources,
    vllm_transfer,
)
from disagg_worker.serve.rules.kv_params import FIELD, KvTransferParams, ParamsError
from disagg_worker.serve.rules.openai import RELEASE_PATH

# A request a decode computes itself by choice (vLLM reads the flags the same way).
LOCAL_PARAMS = KvTransferParams.build(do_remote_prefill=False, do_remote_decode=False)
PREFILL_PARAMS = KvTransferParams.build(
    do_remote_decode=True,
    do_remote_prefill=False,
    remote_engine_id=None,
    remote_block_ids=None,
    remote_host=None,
    remote_port=None,
)


class KvTransferParamsProtocol(PdProtocol):
    """The protocol; its handoff is the prefill's :class:`KvTransferParams`."""

    name: ClassVar[str] = pd.KV_TRANSFER_PARAMS
    owned: ClassVar[tuple[str, ...]] = (FIELD,)
    handoff_name: ClassVar[str] = FIELD
    no_handoff: ClassVar[str] = (
        "is it a prefill worker (vLLM: --kv-transfer-config with kv_role kv_producer or kv_both)?"
    )

    def prefill(self, body: dict[str, Any]) -> dict[str, Any]:
        return {**one_token(body), FIELD: PREFILL_PARAMS.to_wire()}

    def handoff(self, answer: dict[str, Any]) -> KvTransferParams | None:
        """The prefill's params; None when it answered none; ValueError naming the key
        when they cannot be read."""
        wire = answer.get(FIELD)
        if wire is None:
            return None
        try:
            return KvTransferParams.from_wire(wire)
        except ParamsError as e:
            raise ValueError(f"{e}; is it a prefill worker speaking vLLM's convention?") from None

    def decode(self, body: dict[str, Any], handoff: KvTransferParams) -> dict[str, Any]:
        return {**body, FIELD: handoff.to_wire()}

    def local(self, body: dict[str, Any]) -> dict[str, Any]:
        return {**body, FIELD: LOCAL_PARAMS.to_wire()}

    def engine_rank(self, rank: int) -> dict[str, str] | None:
        """vLLM's header (the reference worker runs one engine a pod: never asked)."""
        return {pd.DP_RANK_HEADER: str(rank)}

    def side_channel(self, handoff: KvTransferParams) -> str | None:
        """The prefill engine's own side channel (vLLM: sideChannelPort + its DP rank)."""
        if handoff.remote_host is None or handoff.remote_port is None:
            return None
        return f"{handoff.remote_host}:{handoff.remote_port}"

    def release(self, handoff: KvTransferParams) -> tuple[str, dict[str, Any]] | None:
        return RELEASE_PATH, {FIELD: handoff.to_wire()}

    def page(self, metrics_text: str) -> dict[str, float]:
        # the sources' names (local_compute, ...) and the sums' (bytes, seconds) differ
        return {**vllm_sources(metrics_text), **vllm_transfer(metrics_text)}

    def recomputed(
        self, answer: dict[str, Any], before: Page | None = None, after: Page | None = None
    ) -> str | None:
        if recompute_reason(answer) is not None:
            return (
                "decode computed the prompt itself instead of reading its KV from the "
                f"prefill (the {FIELD} did not reach it)"
            )
        if before is not None and after is not None and vllm_recomputed(before, after):
            return (
                "decode computed the canary's prompt itself (its "
                "vllm:prompt_tokens_by_source_total grew in local_compute, not "
                "external_kv_transfer): its KV connector did not load the prefill's KV"
            )
        return None

    def moved(
        self, answer: dict[str, Any], before: Page | None = None, after: Page | None = None
    ) -> Moved | None:
        found = answer_transfer(answer)
        if found is not None:
            return (*found, "answer")
        if before and after:
            grew = [after.get(k, 0.0) - before.get(k, 0.0) for k in ("bytes", "seconds")]
            return (grew[0], grew[1], "metrics")
        return None


KV_TRANSFER_PARAMS = KvTransferParamsProtocol()
