"""The sync (read → render → plan → execute → status) against an in-memory API double.

The double keeps objects, records reads and writes, and refuses what a test tells it to
(raising the API client's own error with a Status body); no HTTP. The cache the sync
reads is a live view of the double's objects (what the watch-fed kopf indices are in the
operator, without their delay: test_cache.py covers staleness). The end-to-end
behaviour over HTTP is in tests/operator/controller/test_operator.py.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import datetime
import json
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from disagg_operator.api import kinds
from disagg_operator.controller import sync as sync_module
from disagg_operator.controller.client import PLURALS, ApiError
from disagg_operator.controller.config import OperatorConfig
from disagg_operator.controller.reconciler import Clocks, Coalescer, Reconciler
from disagg_operator.controller.rules.cache import Cache, owner
from disagg_operator.controller.rules.keys import derive
from disagg_operator.controller.rules.refusals import Backoff
from disagg_operator.controller.sync import status_patch, sync
from disagg_operator.planning import decide as decide_module
from tests.operator.conftest import until

ROOT = Path(__file__).resolve().parents[3]
NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
LATER = NOW + datetime.timedelta(minutes=5)
ROOT_KEY = b"root" * 8
CONFIG = OperatorConfig(root_key=ROOT_KEY)


def status_text(code: int, reason: str, message: str) -> str:
    """The body a real API server answers a refused request with."""
    return json.dumps(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "code": code,
            "reason": reason,
            "message": message,
        }
    )


class FakeApi:
    """Objects by (kind-plural, name); writes recorded as (verb, kind, name[, subresource])."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.writes: list[tuple[str, ...]] = []
        self.reads: list[str] = []
        self.refuse: dict[tuple[str, str], tuple[int, str]] = {}  # (verb, kind) → answer
        self.events: list[tuple[str, str, str]] = []

    def _check(self, verb: str, kind: str, name: str) -> None:
        if (verb, kind) in self.refuse:
            code, text = self.refuse[verb, kind]
            raise ApiError(code, verb.upper(), f"/{kind}/{name}", text)

    async def get(self, api_version: str, plural: str, namespace: str, name: str) -> Any:
        self.reads.append(plural)
        return copy.deepcopy(self.objects.get((plural, name)))

    async def list(self, api_version: str, plural: str, namespace: str, selector: str = "") -> Any:
        self.reads.append(plural)
        key, _, value = selector.partition("=")
        return [
            copy.deepcopy(o)
            for (p, _), o in sorted(self.objects.items())
            if p == plural and o["metadata"].get("labels", {}).get(key) == value
        ]

    async def create(self, obj: Any) -> Any:
        self.writes.append(("create", obj["kind"], obj["metadata"]["name"]))
        self._check("create", obj["kind"], obj["metadata"]["name"])
        if (PLURALS[obj["kind"]], obj["metadata"]["name"]) in self.objects:
            return None  # 409 AlreadyExists, as the real client answers it
        stored = copy.deepcopy(dict(obj))
        stored["metadata"]["uid"] = f"uid-{len(self.writes)}"
        self.objects[(PLURALS[obj["kind"]], obj["metadata"]["name"])] = stored
        return stored

    async def patch(
        self,
        api_version: str,
        kind: str,
        namespace: str,
        name: str,
        patch: Any,
        *,
        subresource: str = "",
    ) -> Any:
        self.writes.append(("patch", kind, name, subresource))
        self._check("patch", kind, name)
        if subresource == "status":
            self.body["status"] = {
                k: v
                for k, v in {**self.body.get("status", {}), **patch["status"]}.items()
                if v is not None
            }
            return copy.deepcopy(self.body)
        return None

    async def delete(self, api_version: str, kind: str, namespace: str, name: str) -> None:
        self.writes.append(("delete", kind, name))
        self._check("delete", kind, name)
        self.objects.pop((PLURALS[kind], name), None)

    async def event(self, involved: Any, *, type_: str, reason: str, message: str) -> None:
        self.writes.append(("event", type_, reason))
        self.events.append((type_, reason, message))

    @property
    def body(self) -> dict[str, Any]:
        return self.objects[("disaggregateddeployments", "demo")]


class LiveIndex(Mapping[tuple[str, str], list[dict[str, Any]]]):
    """A kopf index's view of the double's objects of ``plurals``, keyed like handlers.py."""

    def __init__(self, api: FakeApi, plurals: set[str], by_owner: bool = True) -> None:
        self.api, self.plurals, self.by_owner = api, plurals, by_owner

    def _table(self) -> dict[tuple[str, str], list[dict[str, Any]]]:
        table: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for (plural, _), obj in sorted(self.api.objects.items()):
            meta = obj["metadata"]
            key = owner(obj) if self.by_owner else (meta.get("namespace", ""), meta["name"])
            if plural in self.plurals and key is not None:
                table.setdefault(key, []).append(obj)
        return table

    def __getitem__(self, key: tuple[str, str]) -> list[dict[str, Any]]:
        return self._table()[key]

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


def cache_of(api: FakeApi) -> Cache:
    children = [LiveIndex(api, {k.plural}) for k in kinds.WATCHED]
    return Cache(LiveIndex(api, {"disaggregateddeployments"}, by_owner=False), children)


def deployment(api: FakeApi, **spec: Any) -> dict[str, Any]:
    body = yaml.safe_load((ROOT / "examples" / "quickstart-cpu.yaml").read_text())
    body["metadata"] = {"name": "demo", "namespace": "ns", "uid": "cr-uid", "generation": 1}
    body["spec"].pop("router", None)  # the pods' children alone, unless a test asks for it
    body["spec"].update(spec)
    api.objects[("disaggregateddeployments", "demo")] = body
    return copy.deepcopy(body)


async def test_first_sync_creates_children_and_writes_status_once() -> None:
    api = FakeApi()
    outcome = await sync(api, cache_of(api), deployment(api), CONFIG, now=NOW)
    kv = api.body["status"]["kvRevision"]
    assert [str(a) for a in outcome.actions] == [
        "create Secret/demo-handshake",
        "create Service/demo-prefill",
        "create Service/demo-decode",
        f"create Service/demo-p-{kv}",
        "create NetworkPolicy/demo-side-channel",  # one pod per role: no budget
        "create Pod/demo-prefill-0",
        "create Pod/demo-decode-0",
    ]
    assert api.writes[-2:] == [
        ("event", "Normal", "Reconciled"),
        ("patch", "DisaggregatedDeployment", "demo", "status"),
    ]
    prefill = api.body["status"]["prefill"]
    assert {k: prefill[k] for k in ("desired", "ready", "updated", "summary")} == {
        "desired": 1,
        "ready": 0,
        "updated": 1,
        "summary": "0/1",
    }
    assert prefill["currentRevision"] == prefill["updateRevision"]


async def test_second_sync_over_the_same_world_writes_nothing() -> None:
    api = FakeApi()
    await sync(api, cache_of(api), deployment(api), CONFIG, now=NOW)
    mark = len(api.writes)
    outcome = await sync(api, cache_of(api), copy.deepcopy(api.body), CONFIG, now=LATER)
    assert outcome.actions == [] and not outcome.status_written
    assert api.writes[mark:] == []


async def test_invalid_spec_writes_status_and_one_event_and_nothing_else() -> None:
    api = FakeApi()
    body = deployment(api, decode={"replicas": 1, "device": "quantum"})
    outcome = await sync(api, cache_of(api), body, CONFIG, now=NOW)
    assert outcome.actions == [] and outcome.problems
    assert api.writes == [
        ("patch", "DisaggregatedDeployment", "demo", "status"),
        ("event", "Warning", "InvalidSpec"),
    ]
    ready = api.body["status"]["conditions"][0]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "False", "InvalidSpec")
    await sync(api, cache_of(api), copy.deepcopy(api.body), CONFIG, now=LATER)
    assert len(api.writes) == 2  # unchanged problems: no new status, no second event


@pytest.mark.parametrize("spec", ["hello", ["a"], {"llmd": "on", "monitoring": 1}])
async def test_a_spec_of_the_wrong_shape_is_invalid_not_a_crash(spec: Any) -> None:
    """An API server refuses these at admission; a sync that meets one anyway (an older
    stored object, a lenient server) reports it as InvalidSpec instead of raising."""
    api = FakeApi()
    body = deployment(api, decode={"replicas": 1})
    body["spec"] = api.body["spec"] = spec
    outcome = await sync(api, cache_of(api), body, CONFIG, now=NOW)
    assert outcome.actions == [] and outcome.problems
    assert outcome.problems[0].field.startswith("spec")
    assert ("event", "Warning", "InvalidSpec") in api.writes


def test_status_patch_removes_vanished_keys_and_is_empty_when_equal() -> None:
    assert status_patch({"a": 1, "b": 2}, {"a": 1, "b": 2}) == {}
    assert status_patch({"a": 1, "gone": 2}, {"a": 3}) == {"gone": None, "a": 3}
    assert status_patch(None, {"a": 1}) == {"a": 1}


async def test_requests_during_a_run_collapse_into_one_rerun() -> None:
    runs: list[str] = []
    release = asyncio.Event()

    async def run(key: object) -> None:
        runs.append(str(key))
        await release.wait()

    coalescer = Coalescer(run)
    first = asyncio.create_task(coalescer.request("a"))
    await asyncio.sleep(0)
    others = [asyncio.create_task(coalescer.request("a")) for _ in range(5)]
    other_key = asyncio.create_task(coalescer.request("b"))
    await asyncio.sleep(0)
    release.set()
    await asyncio.gather(first, *others, other_key)
    assert sorted(runs) == ["a", "a", "b"]


def _conditions(api: FakeApi) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in api.body["status"]["conditions"]}


async def test_the_secret_holds_the_derived_key_and_is_never_read() -> None:
    api = FakeApi()
    await sync(api, cache_of(api), deployment(api), CONFIG, now=NOW)
    secret = api.objects[("secrets", "demo-handshake")]
    key = base64.b64decode(secret["data"]["hmac"]).decode()
    assert key == derive(ROOT_KEY, "ns", "demo", "cr-uid")
    assert "secrets" not in api.reads


async def test_a_recreated_pod_brings_the_secret_create_which_409_leaves_alone() -> None:
    api = FakeApi()
    await sync(api, cache_of(api), deployment(api), CONFIG, now=NOW)
    api.objects[("secrets", "demo-handshake")]["data"]["hmac"] = "b2xk"  # stored: kept
    del api.objects[("pods", "demo-decode-0")]
    mark = len(api.writes)
    outcome = await sync(api, cache_of(api), copy.deepcopy(api.body), CONFIG, now=LATER)
    assert [str(a) for a in outcome.actions] == [
        "create Secret/demo-handshake",
        "create Pod/demo-decode-0",
    ]
    assert [str(a) for a in outcome.done] == ["create Pod/demo-decode-0"]  # 409: no change
    assert api.objects[("secrets", "demo-handshake")]["data"]["hmac"] == "b2xk"
    assert api.events[-1] == ("Normal", "Reconciled", "create Pod/demo-decode-0")
    assert ("create", "Secret", "demo-handshake") in api.writes[mark:]


INVALID = status_text(422, "Invalid", 'Pod "demo-decode-0" is invalid: spec: Forbidden: nope')


async def test_a_refused_create_degrades_warns_once_and_keeps_the_accepted_writes() -> None:
    api = FakeApi()
    api.refuse["create", "Pod"] = (422, INVALID)
    outcome = await sync(api, cache_of(api), deployment(api), CONFIG, now=NOW)
    assert [(r.kind, r.name, r.code) for r in outcome.refusals] == [
        ("Pod", "demo-prefill-0", 422),
        ("Pod", "demo-decode-0", 422),
    ]
    assert {k for k, _ in api.objects} >= {"services", "secrets", "networkpolicies"}
    conditions = _conditions(api)
    assert (conditions["Ready"]["status"], conditions["Ready"]["reason"]) == (
        "False",
        "ApiRefused",
    )
    degraded = conditions["Degraded"]
    assert (degraded["status"], degraded["reason"]) == ("True", "ApiRefused")
    assert (
        'HTTP 422 Invalid: Pod "demo-decode-0" is invalid: spec: Forbidden: nope'
        in (degraded["message"])
    )
    warned = [e for e in api.events if e[0] == "Warning"]
    assert [e[1] for e in warned] == ["ApiRefused"]  # one per distinct answer
    assert warned[0][2].startswith(
        "create Pod/demo-prefill-0, create Pod/demo-decode-0 refused: HTTP 422 Invalid"
    )
    normal = [e for e in api.events if e[0] == "Normal"]
    assert "Pod/" not in normal[0][2]  # only accepted writes are announced
    # The retry gets the same answers: the refused writes again, nothing else.
    mark = len(api.writes)
    again = await sync(api, cache_of(api), copy.deepcopy(api.body), CONFIG, now=LATER)
    assert len(again.refusals) == 2
    assert api.writes[mark:] == [
        ("create", "Secret", "demo-handshake"),  # comes with pod creates; 409
        ("create", "Pod", "demo-prefill-0"),
        ("create", "Pod", "demo-decode-0"),
    ]


async def test_held_writes_are_not_retried_and_stay_reported() -> None:
    api = FakeApi()
    api.refuse["create", "Pod"] = (422, INVALID)
    first = await sync(api, cache_of(api), deployment(api), CONFIG, now=NOW)
    mark = len(api.writes)
    held = await sync(
        api,
        cache_of(api),
        copy.deepcopy(api.body),
        CONFIG,
        now=LATER,
        held=first.refusals,
    )
    assert api.writes[mark:] == []  # not even the Secret: no pod is created
    assert held.refusals == first.refusals and held.actions == []
    del api.refuse["create", "Pod"]
    healed = await sync(api, cache_of(api), copy.deepcopy(api.body), CONFIG, now=LATER)
    assert healed.refusals == [] and len(healed.done) == 2
    assert _conditions(api)["Degraded"]["reason"] == "AsExpected"


@pytest.mark.parametrize("code", [500, 503, 429])
async def test_transient_failures_propagate(code: int) -> None:
    api = FakeApi()
    api.refuse["create", "Pod"] = (code, "busy")
    with pytest.raises(ApiError):
        await sync(api, cache_of(api), deployment(api), CONFIG, now=NOW)


class Timers:
    """A monotonic clock and call_later timers the test moves by hand (no real sleeps)."""

    def __init__(self) -> None:
        self.now = 100.0
        self.due: list[tuple[float, Callable[[], None], Timers.Handle]] = []

    class Handle:
        cancelled = False

        def cancel(self) -> None:
            self.cancelled = True

    def clock(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timers.Handle:
        handle = Timers.Handle()
        self.due.append((self.now + delay, callback, handle))
        return handle

    def delays(self) -> list[float]:
        return [round(at - self.now, 3) for at, _, h in self.due if not h.cancelled]

    def advance(self, seconds: float) -> int:
        """Move the clock; fire the timers now due. Returns how many fired."""
        self.now += seconds
        ready = [t for t in self.due if t[0] <= self.now and not t[2].cancelled]
        self.due = [t for t in self.due if t not in ready and not t[2].cancelled]
        for _, callback, _ in ready:
            callback()
        return len(ready)


async def test_reconciler_backs_off_and_child_events_do_not_retry_refused_writes() -> None:
    api = FakeApi()
    api.refuse["create", "Pod"] = (422, INVALID)
    deployment(api)
    timers = Timers()
    reconciler = Reconciler(
        api,
        cache_of(api),
        OperatorConfig(root_key=ROOT_KEY, backoff=Backoff(first=0.25, cap=0.5)),  # exact sums
        clocks=Clocks(monotonic=timers.clock, call_later=timers.call_later),
    )

    def attempts() -> int:
        return sum(1 for w in api.writes if w[:2] == ("create", "Pod"))

    async def retried(count: int) -> None:  # the fired retry runs as a task: wait for it
        await until(f"{count} pod creates", lambda: attempts() >= count, timeout=10)

    try:
        await reconciler.request("ns", "demo")
        assert attempts() == 2 and timers.delays() == [0.25]
        for _ in range(20):  # a burst of child events inside the back-off
            await reconciler.request("ns", "demo")
        assert attempts() == 2
        assert timers.advance(0.125) == 0  # not yet due
        assert timers.advance(0.125) == 1  # the back-off ends: one retry, two pod creates
        await retried(4)
        assert timers.delays() == [0.5]  # doubled
        assert timers.advance(0.5) == 1
        await retried(6)
        assert timers.delays() == [0.5]  # capped
        del api.refuse["create", "Pod"]
        assert timers.advance(0.5) == 1  # the next timer retry converges
        await retried(8)
        assert ("pods", "demo-decode-0") in api.objects
        assert reconciler.retries.pending(("ns", "demo")) is None
        assert timers.delays() == []  # no timer left
        assert attempts() == 8
    finally:
        reconciler.close()


async def test_a_new_generation_retries_at_once() -> None:
    api = FakeApi()
    api.refuse["create", "Pod"] = (422, INVALID)
    deployment(api)
    reconciler = Reconciler(
        api, cache_of(api), OperatorConfig(root_key=ROOT_KEY, backoff=Backoff(first=60, cap=60))
    )
    try:
        await reconciler.request("ns", "demo")
        del api.refuse["create", "Pod"]
        await reconciler.request("ns", "demo")  # same generation: held for a minute
        assert ("pods", "demo-decode-0") not in api.objects
        api.body["metadata"]["generation"] = 2  # the user changed the spec
        await reconciler.request("ns", "demo")
        assert ("pods", "demo-decode-0") in api.objects
    finally:
        reconciler.close()


async def test_only_a_new_deployment_or_a_new_generation_asks_for_a_sync() -> None:
    """CR events: a deployment not synced since start (new, or a resume) or with a new
    generation is stale; status-only changes (our own patch's echo) are not."""
    api = FakeApi()
    deployment(api)
    reconciler = Reconciler(api, cache_of(api), OperatorConfig(root_key=ROOT_KEY))
    try:
        assert reconciler.stale("ns", "demo", 1)
        await reconciler.request("ns", "demo")
        assert not reconciler.stale("ns", "demo", 1)  # e.g. the event of our status patch
        assert reconciler.stale("ns", "demo", 2)
        reconciler.forget("ns", "demo")
        assert reconciler.stale("ns", "demo", 1)
    finally:
        reconciler.close()


async def test_a_transient_failure_is_retried_with_back_off_until_a_sync_succeeds() -> None:
    api = FakeApi()
    api.refuse["create", "Pod"] = (500, "etcdserver: request timed out")
    deployment(api)
    reconciler = Reconciler(api, cache_of(api), OperatorConfig(root_key=ROOT_KEY, retry_first=0.1))

    async def until(check: Any, timeout: float = 10.0) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        while not check():
            assert asyncio.get_running_loop().time() < deadline, "never happened"
            await asyncio.sleep(0.02)

    try:
        await reconciler.request_or_retry("ns", "demo")  # fails: a retry is scheduled
        assert ("pods", "demo-decode-0") not in api.objects
        assert reconciler.stale("ns", "demo", 1)  # never synced through
        # retried on its own (0.1 s, then 0.2 s later, ...): two pods per attempt
        await until(lambda: sum(1 for w in api.writes if w[:2] == ("create", "Pod")) >= 4)
        del api.refuse["create", "Pod"]
        await until(lambda: ("pods", "demo-decode-0") in api.objects)
        # the sync that converged ends with its status write
        await until(lambda: api.body.get("status", {}).get("decode", {}).get("updated") == 1)
        assert not reconciler.stale("ns", "demo", 1)
        settled = len(api.writes)
        await asyncio.sleep(1.0)
        assert len(api.writes) == settled  # no timer left
    finally:
        reconciler.close()


async def test_a_refused_routing_switch_keeps_the_pods_it_still_routes_to() -> None:
    """A KV-key change: once the new revision is Ready the sync moves the Services and
    deletes the old pods. If the API refuses the Services' patch, the old pods (which the
    Services still select) must stay until a later sync moves the Services."""
    api = FakeApi()
    cache = cache_of(api)

    def ready(*names: str) -> None:
        for name in names:
            api.objects[("pods", name)]["status"] = {
                "conditions": [{"type": "Ready", "status": "True"}]
            }

    await sync(api, cache, deployment(api), CONFIG, now=NOW)
    ready("demo-prefill-0", "demo-decode-0")
    api.body["spec"]["engine"]["image"] = "example.com/worker:2"  # a new KV revision
    api.body["metadata"]["generation"] = 2
    await sync(api, cache, copy.deepcopy(api.body), CONFIG, now=NOW)
    assert {("pods", "demo-prefill-1"), ("pods", "demo-decode-1")} <= set(api.objects)
    ready("demo-prefill-1", "demo-decode-1")
    api.refuse["patch", "Service"] = (422, status_text(422, "Invalid", "denied by policy"))
    outcome = await sync(api, cache, copy.deepcopy(api.body), CONFIG, now=NOW)
    assert {r.kind for r in outcome.refusals} == {"Service"}
    assert {("pods", "demo-prefill-0"), ("pods", "demo-decode-0")} <= set(api.objects)
    assert not [w for w in api.writes if w[0] == "delete"]
    del api.refuse["patch", "Service"]
    await sync(api, cache, copy.deepcopy(api.body), CONFIG, now=NOW)
    assert ("pods", "demo-prefill-0") not in api.objects  # moved, then the old pods go
    assert ("pods", "demo-decode-0") not in api.objects


def test_status_patch_removes_keys_gone_from_a_nested_object() -> None:
    old = {"decode": {"desired": 2, "plannedReplicas": 2}, "phase": "Ready"}
    new = {"decode": {"desired": 1}, "phase": "Ready"}
    assert status_patch(old, new) == {
        "decode": {"plannedReplicas": None, "desired": 1},
        "phase": "Ready",
    }


def _count_calls(
    monkeypatch: pytest.MonkeyPatch, module: Any, name: str, calls: Counter[Any]
) -> None:
    """Count the calls of ``module.name``; a pod's render counts per (role, index)."""
    real = getattr(module, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        key = (name, kwargs["role"], kwargs["index"]) if name == "role_instance" else name
        calls[key] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)


async def test_a_sync_renders_once_before_its_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """One render per sync, made before the plan: the plan before the writes, the pod
    writes and the plan after them (the second decide) all read it, so no instance is
    rendered twice, whether the sync creates pods or rolls old ones."""
    calls: Counter[Any] = Counter()
    for module, name in [
        (sync_module, "rendering"),
        (sync_module, "decide"),
        (sync_module, "render_model"),
        (decide_module, "role_instance"),
    ]:
        _count_calls(monkeypatch, module, name, calls)
    api = FakeApi()
    roles = {
        "prefill": {"replicas": 2, "device": "cpu"},
        "decode": {"replicas": 3, "device": "cpu"},
    }
    await sync(api, cache_of(api), deployment(api, **roles), CONFIG, now=NOW)
    created = {
        ("role_instance", r, i) for r, n in (("prefill", 2), ("decode", 3)) for i in range(n)
    }
    assert calls == Counter(
        {"rendering": 1, "decide": 2, "render_model": 1, **dict.fromkeys(created, 1)}
    )
    calls.clear()
    api.body["spec"]["decode"]["env"] = [{"name": "NEW", "value": "1"}]  # every decode is old
    api.body["metadata"]["generation"] = 2
    outcome = await sync(api, cache_of(api), copy.deepcopy(api.body), CONFIG, now=LATER)
    assert any(a.verb == "delete" for a in outcome.actions)  # a roll: old pods replaced
    assert (calls["rendering"], calls["decide"], calls["render_model"]) == (1, 2, 1)
    renders = {k: n for k, n in calls.items() if k[0] == "role_instance"}
    assert renders and set(renders.values()) == {1}  # each instance rendered once


def test_the_routers_account_is_looked_up_only_with_the_locality_or_while_it_runs_as_it() -> None:
    """A router without transfer locality costs no lookup of its account, Role and binding;
    with it, or while the observed router still runs as that account (the locality or the
    router just turned off: the objects are found and removed), they are read by name."""
    router = {"replicas": 1}
    plain = {"router": router}
    zoned = {"router": router, "routing": {"transferLocality": {"mode": "Required"}}}
    kinds_of = lambda found: sorted(k for _, k, _, _ in found)  # noqa: E731
    access = ["Role", "RoleBinding", "ServiceAccount"]
    assert kinds_of(sync_module.optional_kinds(plain, "demo")) == []
    assert kinds_of(sync_module.optional_kinds(zoned, "demo")) == access
    assert kinds_of(sync_module.optional_kinds(plain, "demo", router_account=True)) == access
    assert kinds_of(sync_module.optional_kinds({}, "demo", router_account=True)) == access
