"""The toy engine's P/D protocol, "tickets": a prefill request says ``toy_phase:
prefill`` and keeps its whole length; the prefill answers a ``toy_ticket`` (an id and
where to fetch the KV); decode gets ``toy_phase: decode`` and the ticket, fetches the KV
over HTTP and says ``toy_kv: fetched`` (or ``computed`` when the ticket was gone) with
the bytes and seconds it took. Nothing of vLLM's ``kv_transfer_params``."""

from __future__ import annotations

from typing import Any, ClassVar

from disagg_worker.serve.pd.base import Moved, Page, PdProtocol

FETCHED = "toy_kv_fetched_total"
COMPUTED = "toy_kv_computed_total"


class ToyEvidence(PdProtocol):
    """What the toy decode says of its KV, whichever protocol brought it: ``toy_kv``,
    ``toy_kv_bytes`` and ``toy_kv_seconds`` in its answer, two counters on its /metrics."""

    computed_why: ClassVar[str] = "the toy decode computed the prompt"

    def page(self, metrics_text: str) -> dict[str, float]:
        out = {}
        for line in metrics_text.splitlines():
            name, _, value = line.partition(" ")
            if name in (FETCHED, COMPUTED):
                out[name] = float(value)
        return out

    def recomputed(
        self, answer: dict[str, Any], before: Page | None = None, after: Page | None = None
    ) -> str | None:
        if answer.get("toy_kv") == "computed":
            return self.computed_why
        if before and after:
            fetched = after.get(FETCHED, 0.0) - before.get(FETCHED, 0.0)
            if fetched <= 0 and after.get(COMPUTED, 0.0) > before.get(COMPUTED, 0.0):
                return f"the toy decode's {COMPUTED} grew and its {FETCHED} did not"
        return None

    def moved(
        self, answer: dict[str, Any], before: Page | None = None, after: Page | None = None
    ) -> Moved | None:
        nbytes, seconds = answer.get("toy_kv_bytes"), answer.get("toy_kv_seconds")
        if isinstance(nbytes, (int, float)) and isinstance(seconds, (int, float)):
            return float(nbytes), float(seconds), "answer"
        return None


class Tickets(ToyEvidence):
    name: ClassVar[str] = "toy-tickets"
    owned: ClassVar[tuple[str, ...]] = ("toy_phase", "toy_ticket")
    handoff_name: ClassVar[str] = "toy_ticket"
    no_handoff: ClassVar[str] = "is it a toy prefill (toy-serve --role prefill)?"
    computed_why: ClassVar[str] = (
        "the toy decode computed the prompt: its ticket was gone from the prefill"
    )

    def prefill(self, body: dict[str, Any]) -> dict[str, Any]:
        return {**body, "toy_phase": "prefill"}

    def handoff(self, answer: dict[str, Any]) -> Any | None:
        ticket = answer.get("toy_ticket")
        if isinstance(ticket, dict) and isinstance(ticket.get("id"), str):
            return ticket
        return None

    def decode(self, body: dict[str, Any], handoff: Any) -> dict[str, Any]:
        return {**body, "toy_phase": "decode", "toy_ticket": handoff}

    def local(self, body: dict[str, Any]) -> dict[str, Any]:
        return {**body, "toy_phase": "local"}

    def release(self, handoff: Any) -> tuple[str, dict[str, Any]] | None:
        return "/toy/drop", {"id": handoff["id"]}


PROTOCOL = Tickets()
