"""The engine interface: what an engine plugs into the operator, and nothing more.

Render, validation, the rollout (KV key), status and the canary call these
methods and never ask which engine they have: an engine is a class here plus a folder
(``engines/<name>/``) and an entry in the settings' engine table (:mod:`.settings`), keyed
by the ``spec.engine.type`` it serves. docs/architecture.md shows a new engine end to end.
The docs generator asks an engine's :class:`EngineDocs` instead, and local runs their own
seam in the tools (``disagg_tools.local.engines``): each caller its own interface.

Each attribute and method says in its docstring what it answers (per role where it takes
``role``); docs/architecture.md's table of them, with the subsystems that read each, is
generated from these docstrings and the sources (scripts/tables.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from disagg_contract.pd import DEFAULT as PD_PROTOCOL
from disagg_operator.api import ROLES, DeploymentSpec, EngineFields
from disagg_operator.api.problems import Problem
from disagg_operator.api.status import Reason
from disagg_operator.contracts.prometheus import AlertSeries

if TYPE_CHECKING:  # the settings hold the engines: a type-only import, no cycle
    from disagg_operator.engines.settings import Settings

Row = tuple[str, str, str, str]  # (value, inputs, result, reason) in docs/derivation.md
Rule = tuple[str, str]  # a CEL rule and its message


@dataclass(frozen=True)
class Container:
    """The engine-specific part of the engine container."""

    command: list[str]
    env: list[dict[str, Any]]
    mounts: list[dict[str, Any]] = field(default_factory=list)
    startup_probe: dict[str, Any] | None = None
    # the image writes only where its mounts are: render sets readOnlyRootFilesystem
    read_only_root: bool = False


@dataclass(frozen=True)
class DemandSeries:
    """The Prometheus series of an engine's pods the autoscaler reads (names as scraped):
    counters of prompt tokens computed, output tokens generated and requests finished,
    and gauges of requests running and waiting (None: the engine has no such gauge)."""

    prompt_tokens: str
    output_tokens: str
    requests: str
    running: str
    waiting: str | None = None


def spec_fields(engines: Mapping[str, Engine]) -> dict[str, EngineFields]:
    """Each engine's own spec fields, by ``spec.engine.type`` (what the API's ``compose``
    and ``foreign`` take)."""
    return {name: e.fields for name, e in engines.items()}


def protocol_args(engine: Engine) -> list[str]:
    """``--pd-protocol`` for the router and the canary: none for the default protocol."""
    if engine.pd_protocol == PD_PROTOCOL:
        return []
    return ["--pd-protocol", engine.pd_protocol]


def flag_values(args: Sequence[str] | None, flags: Sequence[str]) -> dict[str, str]:
    """``--flag value`` and ``--flag=value`` forms in ``args``; the last one wins (as
    argparse does)."""
    found: dict[str, str] = {}
    items = list(args or [])
    for n, item in enumerate(items):
        name, eq, value = item.partition("=")
        if name in flags:
            if eq:
                found[name] = value
            elif n + 1 < len(items):
                found[name] = items[n + 1]
    return found


class Engine:
    """Base class of the engines (see the module docstring). Defaults are those of an
    engine with no side-channel secret, no startup probe and nothing to document."""

    name: ClassVar[str]
    """The ``spec.engine.type`` it serves: its key in the settings' engine table, a value
    of the CRD's enum."""
    summary: ClassVar[str]
    """Its line in the CRD's description of ``spec.engine.type``."""
    cel_rules: ClassVar[tuple[Rule, ...]] = ()
    """Its admission rules: (CEL expression, message) pairs the CRD adds to the spec's
    validations (:meth:`problems` makes the same checks for ``disagg render``)."""
    kv_flags: ClassVar[tuple[str, ...]] = ()
    """Engine flags whose values change the KV layout: the KV key reads them in each role's
    args, so a new value starts a new KV revision."""
    pd_protocol: ClassVar[str] = PD_PROTOCOL
    """The P/D protocol its HTTP API speaks, as the router's and the canary's
    ``--pd-protocol`` name it (how a prefill request is marked, what it returns, how decode
    is told where the KV is, what says decode read it). vLLM's ``kv_transfer_params`` by
    default; another is a :class:`disagg_worker.serve.pd.base.PdProtocol` the engine ships,
    named ``MODULE:ATTR`` (what ``disagg_worker.serve.pd.resolve`` takes)."""
    kv_env: ClassVar[tuple[str, ...]] = ()
    """Env names whose values change the KV layout: the KV key reads them in each role's
    env, so a new value starts a new KV revision."""
    fields: ClassVar[EngineFields] = EngineFields()
    """Its own spec fields, per block (:class:`~disagg_operator.api.extension.EngineFields`:
    spec.modelConfig, spec.kvTransfer, spec.prefill and spec.decode), at the paths users
    write them: the CRD and the parse carry them, and another engine's spec that sets one
    is refused, naming the engines that read it."""
    reasons: ClassVar[tuple[Reason, ...]] = ()
    """The condition reasons it gives (its :meth:`version_condition`'s), each with when:
    rows of docs/crd.md's conditions table and what status accepts of the built-in
    engines."""
    not_kv: ClassVar[frozenset[str]] = frozenset()
    """Its modelConfig fields (Python names) that do not change the KV layout: the KV key
    leaves them out (vLLM: the weights' size)."""
    derived_flags: ClassVar[Mapping[str, str]] = {}
    """Flags it derives → the spec field to set instead (validation refuses them in a
    role's args, naming that field)."""
    demand: ClassVar[DemandSeries]
    """The Prometheus series of its pods the autoscaler reads: prompt and output token
    counters, requests running and waiting (see :class:`DemandSeries`)."""

    def container(
        self, spec: DeploymentSpec, role: str, port: int, settings: Settings
    ) -> Container:
        """The command, env, mounts and startup probe of ``role``'s engine container (render
        adds its name, image, ports, readiness, security, preStop, the user's args and env,
        and resources)."""
        raise NotImplementedError

    def volumes(self, spec: DeploymentSpec, name: str, role: str) -> list[dict[str, Any]]:
        """The pod volumes the container's mounts need (deployment ``name``'s pods)."""
        return []

    def config_maps(self, spec: DeploymentSpec, name: str) -> dict[str, dict[str, str]]:
        """The ConfigMaps those volumes name, name → data (vLLM CPU pools: the engine-idle
        shim); render makes one child of each."""
        return {}

    def metrics_port(self, spec: DeploymentSpec) -> int | None:
        """A port of the engine container that serves /metrics alone (what Prometheus is
        admitted to); None: /metrics is on the serving port (vLLM)."""
        return None

    def alert_series(self, spec: DeploymentSpec) -> AlertSeries:
        """The series of its pods the PrometheusRule's alerts watch (requests waiting,
        decodes that recomputed, failed KV transfers; see :class:`AlertSeries`), None for
        each it does not export: render leaves that alert out, or reads the router's series
        where the router is rendered and feeds it. By default none."""
        return AlertSeries()

    def pod_security(self, spec: DeploymentSpec, role: str) -> dict[str, Any]:
        """Pod securityContext fields beyond seccomp for ``role``'s pods (its image's user,
        where the engine knows it runs as one)."""
        return {}

    def side_channel_ports(self, spec: DeploymentSpec, role: str) -> list[int]:
        """The handshake ports one pod of ``role`` listens on. By default a listener per TP
        rank, on sideChannelPort + rank."""
        base, tp = spec.kv_transfer.side_channel_port, spec.role(role).tensor_parallel_size
        return [base + rank for rank in range(tp)]

    def data_parallel_size(self, spec: DeploymentSpec, role: str) -> int:
        """Engines one pod of ``role`` runs behind its one serving port, each with a side
        channel of its own that the transfer canary proves (``--prefill-ranks``,
        ``--decode-ranks``). By default one."""
        return 1

    def instance_ranks(self, spec: DeploymentSpec, role: str) -> int:
        """Ranks one instance of ``role`` runs: one per tensor-parallel rank."""
        return spec.role(role).tensor_parallel_size

    def devices_per_pod(self, spec: DeploymentSpec, role: str) -> int:
        """Accelerators one pod of ``role`` computes on: its share of the instance's ranks
        (an instance spans ``nodesPerInstance`` pods)."""
        return self.instance_ranks(spec, role) // spec.role(role).nodes_per_instance

    def multinode_problem(self, spec: DeploymentSpec, role: str) -> str | None:
        """Why an instance of ``role`` cannot span pods with this engine (None: it can, as a
        LeaderWorkerSet per instance)."""
        return (
            f"engine {self.name!r} runs each instance in one pod; set 1 (the ranks of "
            "tensorParallelSize then share the pod)"
        )

    def worker_args(self, spec: DeploymentSpec, role: str) -> list[str]:
        """What a group's worker pods add to the engine command (its leader's runs as
        rendered): only asked where :meth:`multinode_problem` is None."""
        raise NotImplementedError

    def drain_seconds(self, spec: DeploymentSpec) -> int:
        """How long a terminating pod waits for its transfers to finish: render's preStop
        and grace period, at least this."""
        raise NotImplementedError

    def drain_command(self, spec: DeploymentSpec, settle: int, seconds: int) -> list[str]:
        """The preStop: keep serving ``settle`` seconds (until the pod's endpoint clients
        have seen it leave), then wait up to ``seconds`` (render's choice: at least the
        drain)."""
        return ["sleep", str(settle + seconds)]

    def annotations(self, spec: DeploymentSpec) -> dict[str, str]:
        """Notes render puts on every pod (vLLM: the version and profile it rendered for)."""
        return {}

    def problems(self, spec: DeploymentSpec, settings: Settings) -> Iterator[Problem]:
        """What this engine cannot run in ``spec``, each with its field and fix (the checks
        of its :attr:`cel_rules` included, in the same words)."""
        return iter(())

    def version_key(self, spec: DeploymentSpec) -> Any:
        """What fixes the KV layout beyond the spec's fields: by default the images."""
        return sorted({spec.image(r) for r in ROLES})

    def version_condition(self, spec: DeploymentSpec) -> tuple[str, str, str] | None:
        """The EngineVersionKnown condition as (status, reason, message), or None where the
        engine has no version to know (no condition)."""
        return None

    def canary_image(self, spec: DeploymentSpec, settings: Settings) -> str | None:
        """The transfer canary's image, or None (no canary: TransferPathReady says so). By
        default the operator's ``--canary-image``."""
        return settings.canary_image

    def derived_env(self, spec: DeploymentSpec, role: str) -> Mapping[str, str]:
        """Env names it derives for ``role`` → the spec field to set instead (validation
        refuses them in a role's env, naming that field)."""
        return {}

    def kv_events_ports(self, spec: DeploymentSpec, role: str) -> list[int]:
        """The ports one pod of ``role`` publishes its KV cache events on for the router
        (``spec.routing.prefixIndex: events``); none: the engine publishes none."""
        return []

    def kv_events_router_args(self, spec: DeploymentSpec) -> list[str]:
        """The router's flags that subscribe to those events (where they are published,
        how the engine hashes blocks); none where the engine publishes none."""
        return []

    def prefix_cache_block(self, spec: DeploymentSpec) -> int | None:
        """The decode engine's prefix cache unit in tokens (routers count a prompt's blocks
        it already holds), or None when it keeps no prefix cache."""
        return None


class EngineDocs:
    """What an engine adds to the generated docs: the docs generator's seam, apart from the
    operator's (render and validation never ask an engine for prose). One per engine, in
    its folder's ``docs.py``, looked up by :attr:`name`; an engine without one adds
    nothing."""

    name: ClassVar[str]
    """The ``spec.engine.type`` of the engine it documents."""

    def derivation_rows(self, settings: Settings) -> list[Row]:
        """Its rows of docs/derivation.md: each value it derives, from what, and why."""
        return []

    def derivation_tables(self) -> list[str]:
        """Its own markdown tables in docs/derivation.md, after the rows (vLLM: what each
        release accepts, one row per contract profile)."""
        return []
