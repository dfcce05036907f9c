"""The local kubelet's probe workers against the kubelet's own tests: the cases of
``pkg/kubelet/prober/worker_test.go`` and ``prober_manager_test.go`` (kubernetes/kubernetes,
the worker as it stands from 1.35 through 1.36: the version that reads the
ContainerRestartRules gate), restated as data, each named by its upstream function, and
run against :mod:`disagg_tools.local.kubelet.rules.probes`.

The upstream helpers these cases rely on (``common_test.go``): the test pod's restart
policy is Never; ``setTestProbe`` fills a zero timeout, period and thresholds with 1; the
fake prober answers Success unless a case says otherwise; ``getTestRunningStatus`` is a
running container with ``started`` true, ``getTestNotRunningStatus`` the same with
``started`` false.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from disagg_tools.local.kubelet.rules import lifecycle
from disagg_tools.local.kubelet.rules.probes import (
    FAILURE,
    INITIAL,
    LIVENESS,
    READINESS,
    STARTUP,
    SUCCESS,
    UNKNOWN,
    Probes,
    Rule,
    Seen,
    Worker,
)

UPSTREAM = "kubernetes/kubernetes pkg/kubelet/prober/worker_test.go"
ID = "test://cOnTaInEr_Id"
NOW = 1000.0
POD_SPEC = {"restartPolicy": "Never", "containers": [{"name": "cOnTaInEr_NaMe"}]}
KINDS = {"liveness": LIVENESS, "readiness": READINESS, "startup": STARTUP}


def _worker(kind: str, **probe: int) -> Worker:
    """``newTestWorker``: the probe with the test defaults (timeout, period and both
    thresholds 1 where 0), built as the worker reads it (no API validation: the upstream
    cases use a negative initial delay)."""
    fields = {"period": 1, "timeout": 1, "successes": 1, "failures": 1, "delay": 0} | probe
    return Worker(Rule(kind, {"exec": {}}, **fields), next_at=NOW, origin=NOW)


def _status(name: str, started: bool) -> Seen | None:
    """The statuses of TestDoProbe: running, pending, terminated, other, failed."""
    running = Seen(ID, running=True, started_at=NOW, started=started)
    exited = lifecycle.should_restart(POD_SPEC["containers"][0], POD_SPEC, 0)
    return {
        "none": None,
        "running": running,
        "pending": replace(running, running=False),
        "terminated": replace(running, running=False, exited=True, restarts=exited),
        "other": Seen(),  # no status for this container
        "failed": replace(running, pod_done=True),
    }[name]


def _do_probe(w: Worker, seen: Seen | None, answer: str = SUCCESS, now: float = NOW) -> bool:
    """``doProbe`` with the fake prober answering ``answer``: whether the worker goes on."""
    if w.prepare(seen or Seen(), now):
        w.record(answer)
    return not w.gone


# TestDoProbe: (case, status, probe, deleting, continue for liveness/readiness/startup,
# a result set, the result)
DO_PROBE = [
    ("No status", "none", {}, False, (True, True, True), False, None),
    ("Pod failed", "failed", {}, False, (False, False, False), False, None),
    ("Pod deletion", "running", {}, True, (False, True, False), True, SUCCESS),
    ("No container status", "other", {}, False, (True, True, True), False, None),
    ("Container waiting", "pending", {}, False, (True, True, True), True, FAILURE),
    ("Container terminated", "terminated", {}, False, (False, False, False), True, FAILURE),
    ("Probe successful", "running", {}, False, (True, True, True), True, SUCCESS),
    ("Initial delay passed", "running", {"delay": -100}, False, (True, True, True), True, SUCCESS),
]
DO_PROBE_CASES = [
    pytest.param(kind, *row, id=f"{kind}-{row[0]}")
    for kind in ("liveness", "readiness", "startup")
    for row in DO_PROBE
]


@pytest.mark.parametrize(
    ("kind", "case", "status", "probe", "deleting", "goes_on", "is_set", "result"),
    DO_PROBE_CASES,
)
def test_do_probe(
    kind: str,
    case: str,
    status: str,
    probe: dict[str, int],
    deleting: bool,
    goes_on: tuple[bool, bool, bool],
    is_set: bool,
    result: str | None,
) -> None:
    """TestDoProbe, each row for each probe type (the status's ``started`` is true but
    for a startup probe, as ``getTestRunningStatusWithStarted(probeType != startup)``)."""
    w = _worker(KINDS[kind], **probe)
    seen = _status(status, started=kind != "startup")
    if seen is not None and deleting:
        seen = replace(seen, deleting=True)
    expected = dict(zip(("liveness", "readiness", "startup"), goes_on, strict=True))[kind]
    assert _do_probe(w, seen) == expected, case
    assert (w.result is not None) == is_set, case
    assert w.result == result, case


@pytest.mark.parametrize("kind", ["liveness", "readiness", "startup"])
def test_initial_delay(kind: str) -> None:
    """TestInitialDelay: the initial result during the delay, Success once past it."""
    w = _worker(KINDS[kind], delay=10)
    seen = _status("running", started=kind != "startup")
    assert seen is not None
    assert _do_probe(w, seen)
    assert w.result == {"liveness": SUCCESS, "readiness": FAILURE, "startup": UNKNOWN}[kind]
    assert w.result == INITIAL[KINDS[kind]]
    assert _do_probe(w, replace(seen, started_at=NOW - 100))
    assert w.result == SUCCESS


# Scripted tests: (what happens, the result after it, resultRun, onHold); None: not checked.
# "S"/"F": the prober answers Success/Failure and doProbe runs; "check": nothing runs;
# "started": the status's started turns true; "new": a new container ID.
Step = tuple[str, "str | None", "int | None", "bool | None"]
S, F = "S", "F"
SCRIPTS: dict[str, tuple[str, dict[str, int], bool, list[Any]]] = {
    "TestFailureThreshold": (
        READINESS, {"successes": 1, "failures": 3}, True,
        2 * ([(S, SUCCESS, None, None)] * 3 + [(F, SUCCESS, None, None)] * 2
             + [(F, FAILURE, None, None)] * 3),
    ),
    "TestSuccessThreshold": (
        READINESS, {"successes": 3, "failures": 1}, True,
        2 * ([(S, FAILURE, None, None)] * 2 + [(S, SUCCESS, None, None)] * 3
             + [(F, FAILURE, None, None)]),
    ),
    "TestStartupProbeSuccessThreshold": (
        STARTUP, {"successes": 1, "failures": 3}, False,
        [("check", None, None, False), (S, SUCCESS, None, None), ("check", None, 0, True)],
    ),
    "TestStartupProbeFailureThreshold": (
        STARTUP, {"successes": 1, "failures": 3}, False,
        [("check", None, None, False), (F, UNKNOWN, 1, None),
         ("check", None, None, False), (F, UNKNOWN, 2, None),
         ("check", None, None, False), (F, FAILURE, 0, None), ("check", None, 0, True)],
    ),
    "TestOnHoldOnLivenessOrStartupCheckFailure[liveness]": (
        LIVENESS, {"successes": 1, "failures": 1}, True,
        [(F, FAILURE, None, True), (S, FAILURE, None, True),
         ("new", None, None, None), (S, SUCCESS, None, False)],
    ),
    "TestOnHoldOnLivenessOrStartupCheckFailure[startup]": (
        STARTUP, {"successes": 1, "failures": 1}, False,
        [(F, FAILURE, None, True), (S, FAILURE, None, True),
         ("new", None, None, None), (S, SUCCESS, None, True)],
    ),
    "TestResultRunOnLivenessCheckFailure": (
        LIVENESS, {"successes": 1, "failures": 3}, True,
        [(S, SUCCESS, 1, None), (F, SUCCESS, 1, None), (F, SUCCESS, 2, None),
         (F, FAILURE, 0, None)],
    ),
    "TestResultRunOnStartupCheckFailure": (
        STARTUP, {"successes": 1, "failures": 3}, False,
        [(F, UNKNOWN, 1, None), (F, UNKNOWN, 2, None), (F, FAILURE, 0, None)],
    ),
    "TestLivenessProbeDisabledByStarted": (
        LIVENESS, {"successes": 1, "failures": 1}, False,
        [(F, SUCCESS, None, None), ("started", None, None, None), (F, FAILURE, None, None)],
    ),
    "TestStartupProbeDisabledByStarted": (
        STARTUP, {"successes": 1, "failures": 2}, False,
        [(F, UNKNOWN, None, None), (S, SUCCESS, None, None), ("started", None, None, None),
         (F, SUCCESS, None, None)],
    ),
}  # fmt: skip


def _play(kind: str, probe: dict[str, int], started: bool, steps: list[Step]) -> list[bool]:
    """Each step of a script, whether its checks held."""
    w = _worker(kind, **probe)
    seen = _status("running", started)
    assert seen is not None
    agree = []
    for event, result, run, hold in steps:
        if event == "started":
            seen = replace(seen, started=True)
        elif event == "new":
            seen = replace(seen, instance="test://newCont_ID")
        elif event != "check":
            assert _do_probe(w, seen, SUCCESS if event == S else FAILURE)
        agree.append(
            (result is None or w.result == result)
            and (run is None or w.run == run)
            and (hold is None or w.on_hold == hold)
        )
    return agree


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_worker_scripts(name: str) -> None:
    kind, probe, started, steps = SCRIPTS[name]
    agree = _play(kind, probe, started, steps)
    assert all(agree), [s for s, ok in zip(steps, agree, strict=True) if not ok]


# ---------------------------------------------------------------- prober_manager_test.go

# TestUpdatePodStatus: container → (its workers, the results set, expected ready)
UPDATE_POD_STATUS: dict[str, tuple[dict[str, str | None], bool, bool]] = {
    "unprobed_container": ({LIVENESS: None}, True, True),
    "probed_container_ready": ({READINESS: SUCCESS}, True, True),
    "probed_container_pending": ({READINESS: None}, True, False),
    "probed_container_unready": ({READINESS: FAILURE}, True, False),
    "not_started_container_no_readiness": ({STARTUP: None}, True, False),
    "started_container_no_readiness": ({STARTUP: SUCCESS}, True, True),
    "terminated_container": ({READINESS: SUCCESS}, False, False),
}


@pytest.mark.parametrize("name", sorted(UPDATE_POD_STATUS))
def test_update_pod_status(name: str) -> None:
    """TestUpdatePodStatus (prober_manager_test.go): a container's ready from its workers
    and their cached results; the terminated one is not running."""
    workers, running, ready = UPDATE_POD_STATUS[name]
    probes = Probes()
    for kind, result in workers.items():
        w = _worker(kind)
        w.instance, w.result = f"test://{name}_id", result
        probes.workers[kind] = w
    seen = Seen(f"test://{name}_id", running=running, exited=not running)
    assert probes.ready(seen) == ready


# ---------------------------------------------------------------- what the cases leave out


def _seen(**kw: Any) -> Seen:
    return Seen(ID, running=True, started_at=NOW, **kw)


def test_the_ticker_keeps_its_phase_and_a_manual_run_restarts_it() -> None:
    """``run``: doProbe at start, then on each tick; a manual trigger runs now and
    resets the ticker (``probeTicker.Reset``) from that moment."""
    w = _worker(READINESS, period=5)
    assert w.due(NOW)
    w.ticked(NOW + 0.2)  # a run that started a little late keeps the phase
    assert w.next_at == NOW + 5
    w.ticked(NOW + 7.5)  # a slow run: the next tick after it
    assert w.next_at == NOW + 10
    w.trigger(NOW + 8)
    assert w.due(NOW + 8)
    w.ticked(NOW + 8)
    assert w.next_at == NOW + 13


def test_the_initial_delay_is_counted_in_whole_seconds_as_go_truncates() -> None:
    w = _worker(READINESS, delay=3)
    assert not w.prepare(_seen(started=True), NOW + 2.99)  # int(2.99) = 2 < 3
    assert w.prepare(_seen(started=True), NOW + 3.0)


def test_a_sync_triggers_readiness_of_a_started_unready_container_only() -> None:
    probes = Probes.of(
        {"readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 5},
         "startupProbe": {"exec": {"command": ["true"]}, "periodSeconds": 2}},
        origin=NOW,
    )  # fmt: skip
    ready, start = probes.workers[READINESS], probes.workers[STARTUP]
    assert (ready.next_at, start.next_at) == (NOW + 5, NOW + 2)  # no container at origin
    seen = _seen(started=False)
    probes.sync(seen, NOW + 1)
    assert not ready.due(NOW + 1)  # not started: no trigger
    assert start.prepare(seen, NOW + 2)
    start.record(SUCCESS)
    seen = replace(seen, started=probes.started(seen))
    assert seen.started
    probes.sync(seen, NOW + 2.1)
    assert ready.due(NOW + 2.1)  # started, not ready: run now


def test_a_liveness_or_startup_failure_asks_for_a_kill_of_that_container_only() -> None:
    probes = Probes.of({"livenessProbe": {"exec": {"command": ["x"]}, "failureThreshold": 2}}, NOW)
    live = probes.workers[LIVENESS]
    seen = _seen(started=True)
    for answer in (FAILURE, FAILURE):
        assert live.prepare(seen, NOW)
        live.record(answer)
    assert probes.kill_reason(seen) == "failed liveness probe"
    assert probes.kill_reason(replace(seen, instance="test://next")) is None
    assert not live.prepare(seen, NOW + 1)  # on hold until a new container


@pytest.mark.parametrize(
    ("probe", "message"),
    [
        ({}, "exactly one of httpGet"),
        ({"exec": {}, "httpGet": {}}, "exactly one of"),
        ({"exec": {}, "periodSeconds": 0.5}, "periodSeconds: must be a whole number"),
        ({"exec": {}, "failureThreshold": -1}, "failureThreshold: must be a whole number"),
    ],
)
def test_a_probe_the_api_server_would_refuse_is_refused(
    probe: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        Rule.of(READINESS, probe)


def test_liveness_and_startup_need_a_success_threshold_of_1_and_zeros_are_defaulted() -> None:
    with pytest.raises(ValueError, match=r"livenessProbe\.successThreshold: must be 1"):
        Rule.of(LIVENESS, {"exec": {}, "successThreshold": 2})
    rule = Rule.of(READINESS, {"httpGet": {"port": 1}, "periodSeconds": 0})
    assert (rule.delay, rule.period, rule.timeout, rule.successes, rule.failures) == (
        0, 10, 1, 1, 3,
    )  # fmt: skip
