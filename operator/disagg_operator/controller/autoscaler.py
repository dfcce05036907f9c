"""The autoscaler: Prometheus and the pools' profile in, ``status.<role>.plannedReplicas``
out (``spec.autoscaling``; docs/autoscaling.md).

I/O shell around the pure planner (:func:`disagg_operator.planning.autoscale.plan`). Every
``spec.autoscaling.periodSeconds`` per deployment it reads the profile ConfigMap and the
demand from Prometheus, plans (its memory kept per deployment), and writes the planned
counts when a count or the reason changed, then asks for a sync. It writes status, never
pods, so one path (the sync) still makes every pod write. Each step and what a pass that
cannot plan says: docs/autoscaling.md ("What it does each period").
"""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
import math
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from disagg_operator.api import API_VERSION, ROLES, DeploymentSpec
from disagg_operator.contracts import prometheus
from disagg_operator.controller.rules.cache import Cache, Recorder
from disagg_operator.derive.scaling import applies, effective_replicas, planned
from disagg_operator.engines.base import DemandSeries
from disagg_operator.engines.settings import DEFAULT, Settings
from disagg_operator.planning import autoscale
from disagg_operator.validation.spec import parse

log = logging.getLogger("disagg.operator")
TICK_S = 1.0  # how often deployments are looked at; each plans every periodSeconds
PROFILE_TTL_S = 60.0  # a profile ConfigMap is read again after this
HISTORY_S = 900.0  # demand kept per deployment (the forecast reads the last few minutes)
TIMEOUT_S = 5.0


class PrometheusError(Exception):
    """Prometheus could not be asked, or refused the query (its words)."""


class Prometheus:
    """The instant-query API (``GET /api/v1/query``) of any Prometheus; ``start`` first."""

    def __init__(self, timeout_s: float = TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout_s))

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def vector(self, url: str, query: str) -> list[tuple[dict[str, str], float]]:
        """The instant vector ``query`` gives now: (labels, value) per series; NaN is 0."""
        assert self._session is not None, "Prometheus.start() first"
        try:
            async with self._session.get(
                url.rstrip("/") + "/api/v1/query", params={"query": query}
            ) as resp:
                body = await resp.json(content_type=None)
        except (asyncio.TimeoutError, aiohttp.ClientError, ValueError) as e:
            raise PrometheusError(f"{url} could not be asked: {e or type(e).__name__}") from e
        if not isinstance(body, dict) or body.get("status") != "success":
            said = body.get("error") if isinstance(body, dict) else body
            raise PrometheusError(f"{url} refused {query!r}: {said}")
        data = body.get("data") or {}
        if data.get("resultType") != "vector":
            raise PrometheusError(f"{url} answered {data.get('resultType')!r} for {query!r}")
        out = []
        for item in data.get("result") or []:
            value = float(item["value"][1])
            out.append((dict(item.get("metric") or {}), 0.0 if math.isnan(value) else value))
        return out


def seconds(duration: str) -> float:
    """A Prometheus duration (``30s``, ``1m30s``) in seconds."""
    units = {"y": 31536000, "w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1, "ms": 0.001}
    total, number = 0.0, ""
    i = 0
    while i < len(duration):
        ch = duration[i]
        if ch.isdigit():
            number += ch
            i += 1
            continue
        unit = "ms" if duration[i : i + 2] == "ms" else ch
        total += int(number or 0) * units[unit]
        number, i = "", i + len(unit)
    return total


def queries(series: DemandSeries, namespace: str, name: str, interval: str) -> dict[str, str]:
    """The PromQL of one pass: ``prompt`` and ``output`` tokens/s, requests finished per
    second (``requests_<role>``), running per pod (``busy_<role>``) and waiting
    (``waiting_<role>``), over the PodMonitors' jobs (``<namespace>/<name>-<role>``) and the
    series the engine seam names."""
    window = f"{max(4.0, 4 * seconds(interval)):g}s"  # rate needs a few scrapes in it
    job = {r: f'{{job="{prometheus.job(namespace, f"{name}-{r}")}"}}' for r in ROLES}
    out = {
        "prompt": f"sum(rate({series.prompt_tokens}{job['prefill']}[{window}]))",
        "output": f"sum(rate({series.output_tokens}{job['decode']}[{window}]))",
    }
    for r in ROLES:
        out[f"requests_{r}"] = f"sum(rate({series.requests}{job[r]}[{window}]))"
        out[f"busy_{r}"] = f"sum by (pod) ({series.running}{job[r]})"
        if series.waiting is not None:
            out[f"waiting_{r}"] = f"sum({series.waiting}{job[r]})"
    return out


@dataclass
class Reading:
    """What one pass read of Prometheus."""

    prompt_tokens_per_s: float
    output_tokens_per_s: float
    busy: dict[str, float]  # pod name → requests running
    waiting: dict[str, float]  # role → requests waiting
    requests_per_s: dict[str, float]  # role → requests finished per second


async def read(prom: Prometheus, url: str, asked: Mapping[str, str]) -> Reading:
    """Ask every query of :func:`queries`; PrometheusError when one fails or the demand
    series have no sample (no pod scraped yet, or the PodMonitors are not picked up)."""
    found = await asyncio.gather(*(prom.vector(url, q) for q in asked.values()))
    answers = dict(zip(asked, found, strict=True))
    missing = [k for k in ("prompt", "output") if not answers[k]]
    if missing:
        raise PrometheusError(
            f"no samples for {', '.join(asked[k] for k in missing)}: is Prometheus picking up "
            "the deployment's PodMonitors (spec.monitoring.labels for its podMonitorSelector)?"
        )
    busy = {
        labels["pod"]: value
        for r in ROLES
        for labels, value in answers[f"busy_{r}"]
        if "pod" in labels
    }
    waiting: dict[str, float] = {
        r: sum(v for _, v in answers.get(f"waiting_{r}", [])) for r in ROLES
    }
    done: dict[str, float] = {r: sum(v for _, v in answers[f"requests_{r}"]) for r in ROLES}
    return Reading(answers["prompt"][0][1], answers["output"][0][1], busy, waiting, done)


@dataclass
class State:
    """What the autoscaler keeps of one deployment between passes."""

    history: list[autoscale.Demand] = field(default_factory=list)
    memory: autoscale.Memory = field(default_factory=autoscale.Memory)
    due: float = 0.0
    busy: dict[str, float] = field(default_factory=dict)


class Autoscaler:
    """Plans every autoscaled deployment of ``cache`` (module docstring); ``request_sync``
    is asked for a sync of a deployment whose plan changed. ``clock``: monotonic seconds
    (the planner's time); ``wall``: the time written to status."""

    def __init__(
        self,
        api: Any,
        cache: Cache,
        request_sync: Callable[[str, str], None],
        *,
        settings: Settings = DEFAULT,
        prometheus_url: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime.datetime] | None = None,
    ) -> None:
        self.api, self.cache, self.request_sync = api, cache, request_sync
        self.settings, self.prometheus_url = settings, prometheus_url
        self.clock = clock
        self.wall = wall or (lambda: datetime.datetime.now(tz=datetime.timezone.utc))
        self.prometheus = Prometheus()
        self._state: dict[Hashable, State] = {}
        self._profiles: dict[tuple[str, str, str], tuple[float, Any]] = {}

    async def start(self) -> None:
        await self.prometheus.start()

    async def close(self) -> None:
        await self.prometheus.close()

    def busy(self, key: Hashable) -> Mapping[str, float]:
        """Requests running per pod of deployment ``key``, as last read ({}: never): the
        sync's scale-down takes the least busy pods first."""
        state = self._state.get(key)
        return state.busy if state is not None else {}

    def forget(self, key: Hashable) -> None:
        self._state.pop(key, None)

    async def run_forever(self, tick: float = TICK_S) -> None:
        while True:
            await asyncio.sleep(tick)
            await self.tick()

    async def tick(self) -> None:
        """Plan each autoscaled deployment whose period has come (one failing deployment
        does not stop the others)."""
        now = self.clock()
        due = []
        for key in self.cache.deployments():
            body = self.cache.deployment(*key)
            spec = (body or {}).get("spec")
            auto = spec.get("autoscaling") if isinstance(spec, dict) else None
            if not isinstance(auto, dict):
                self._state.pop(key, None)
                continue
            state = self._state.setdefault(key, State())
            if now >= state.due:
                state.due = now + float(auto.get("periodSeconds") or 15)
                due.append(key)
        results = await asyncio.gather(*(self.plan_once(k) for k in due), return_exceptions=True)
        for key, result in zip(due, results, strict=True):
            if isinstance(result, BaseException):
                log.warning("autoscaling of %s/%s failed: %s", *key, result)

    async def plan_once(self, key: tuple[str, str]) -> autoscale.Decision | None:
        """One pass for deployment ``key`` (module docstring); the decision, or None when
        no plan could be made (status.autoscaling says why)."""
        body = self.cache.deployment(*key)
        if body is None:
            return None
        dd, problems = parse(body, self.settings)
        if dd is None or problems or dd.spec.autoscaling is None:
            return None  # the sync reports an invalid spec
        spec, auto = dd.spec, dd.spec.autoscaling
        state = self._state.setdefault(key, State())
        url = auto.prometheus_url or self.prometheus_url
        if url is None:
            how = "the operator's --prometheus-url (the chart's autoscaling.prometheusUrl)"
            await self._say(body, "NoPrometheus", f"set spec.autoscaling.prometheusUrl or {how}")
            return None
        try:
            profiles = await self._profile(key[0], spec)
        except ValueError as e:
            await self._say(body, "NoProfile", str(e))
            return None
        series = self.settings.engine(spec).demand
        assert spec.monitoring is not None  # validation: autoscaling needs it
        asked = queries(series, key[0], key[1], spec.monitoring.interval)
        try:
            reading = await read(self.prometheus, url, asked)
        except PrometheusError as e:
            await self._say(body, "NoMetrics", str(e))
            return None
        now = self.clock()
        state.busy = reading.busy
        policy = autoscale.from_spec(auto)
        settings = policy.settings
        served = {"prefill": reading.prompt_tokens_per_s, "decode": reading.output_tokens_per_s}
        wanted = {
            r: autoscale.with_queue(
                served[r], reading.waiting[r], reading.requests_per_s[r], settings.smooth_s
            )
            for r in ROLES
        }
        state.history = [d for d in state.history if d.at >= now - HISTORY_S]
        state.history.append(autoscale.Demand(now, wanted["prefill"], wanted["decode"]))
        status = body.get("status") or {}
        # what the last plan asked (what runs, in mode Apply), else what runs now
        current = {r: effective_replicas(spec, r) for r in ROLES} | planned(status)
        decision = autoscale.plan(state.history, profiles, policy, current, state.memory, now)
        if applies(spec):
            decision = _held_for_rollout(decision, current, status)
        await self._write(body, decision, reading, apply=applies(spec))
        return decision

    async def _profile(self, namespace: str, spec: DeploymentSpec) -> dict[str, Any]:
        assert spec.autoscaling is not None
        ref, percentile = spec.autoscaling.profile, spec.autoscaling.targets.percentile
        where = f"ConfigMap {namespace}/{ref.config_map} key {ref.key}"
        cached = self._profiles.get((namespace, ref.config_map, ref.key))
        if cached is not None and cached[0] > self.clock():
            data = cached[1]
        else:
            found = await self.api.get("v1", "configmaps", namespace, ref.config_map)
            text = ((found or {}).get("data") or {}).get(ref.key)
            if text is None:
                raise ValueError(
                    f"{where} is missing; create it from `disagg bench profile --out FILE` "
                    f"(kubectl create configmap {ref.config_map} --from-file={ref.key}=FILE)"
                )
            try:
                data = json.loads(text)
            except ValueError as e:
                raise ValueError(f"{where}: not JSON ({e})") from None
            if not isinstance(data, dict):
                raise ValueError(f"{where}: want the object disagg bench profile writes")
            self._profiles[(namespace, ref.config_map, ref.key)] = (
                self.clock() + PROFILE_TTL_S,
                data,
            )
        measured = autoscale.percentile_of(data)
        if measured != percentile:
            raise ValueError(
                f"{where} was measured at p{measured}, spec.autoscaling.targets.percentile is "
                f"{percentile}; measure it at p{percentile} or set the percentile to {measured}"
            )
        try:
            return autoscale.profiles_from(data)
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None

    async def _say(self, body: dict[str, Any], reason: str, message: str) -> None:
        """Report a pass that made no plan (once per change of reason or message)."""
        said = (body.get("status") or {}).get("autoscaling") or {}
        if said.get("reason") == reason and said.get("message") == message:
            return
        log.warning("autoscaling of %s/%s: %s: %s", body["metadata"]["namespace"],
                    body["metadata"]["name"], reason, message)  # fmt: skip
        await self._patch(body, {"autoscaling": {"reason": reason, "message": message}})

    async def _write(
        self, body: dict[str, Any], decision: autoscale.Decision, reading: Reading, apply: bool
    ) -> None:
        status = body.get("status") or {}
        before = {r: (status.get(r) or {}).get("plannedReplicas") for r in ROLES}
        reason = (status.get("autoscaling") or {}).get("reason")
        if before == decision.replicas and reason == decision.reason:
            return
        waiting = ", ".join(f"{r} {reading.waiting[r]:g}" for r in ROLES if reading.waiting[r])
        message = decision.message + (f"; waiting: {waiting}" if waiting else "")
        patch: dict[str, Any] = {r: {"plannedReplicas": decision.replicas[r]} for r in ROLES}
        patch["autoscaling"] = {
            "reason": decision.reason,
            "message": message,
            "lastPlanTime": self.wall().strftime("%Y-%m-%dT%H:%M:%SZ"),
            "promptTokensPerSecond": round(reading.prompt_tokens_per_s, 1),
            "outputTokensPerSecond": round(reading.output_tokens_per_s, 1),
        }
        await self._patch(body, patch)
        if before != decision.replicas:
            await self.api.event(body, type_="Normal", reason=decision.reason, message=message)
            meta = body["metadata"]
            if apply:  # Recommend: nothing to render, a KEDA or HPA acts on the gauge
                self.request_sync(meta["namespace"], meta["name"])

    async def _patch(self, body: dict[str, Any], patch: dict[str, Any]) -> None:
        meta = body["metadata"]
        answer = await self.api.patch(
            API_VERSION, body["kind"], meta["namespace"], meta["name"], {"status": patch},
            subresource="status",
        )  # fmt: skip
        Recorder(self.cache, (meta["namespace"], meta["name"])).wrote(answer)


def _held_for_rollout(
    decision: autoscale.Decision, current: Mapping[str, int], status: Mapping[str, Any]
) -> autoscale.Decision:
    """No role shrinks while a rollout is on (a role's pods run two templates, or the
    routers select an older KV revision than the spec's): the rollout's own bounds decide
    what goes then."""
    roles = [status.get(r) or {} for r in ROLES]
    rolling = any(s.get("currentRevision") != s.get("updateRevision") for s in roles)
    rolling = rolling or status.get("kvRevision") != status.get("routedKvRevision")
    if not rolling or all(decision.replicas[r] >= current[r] for r in ROLES):
        return decision
    kept: dict[str, int] = {r: max(decision.replicas[r], current[r]) for r in ROLES}
    message = "RolloutInProgress: no role shrinks while pods are replaced; " + decision.message
    return autoscale.Decision(kept, decision.needs, decision.forecast, "RolloutInProgress", message)
