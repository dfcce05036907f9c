"""LeaderWorkerSet, and what Volcano and Kueue read on one: the objects the operator renders
for an instance that spans pods (``spec.<role>.nodesPerInstance`` above 1).

The one source of truth for these external contracts (render, validation, the docs and the
tests read it), so an upgrade of LWS or Kueue changes one file. Read at these tags:
kubernetes-sigs/lws v0.10.0 (``api/leaderworkerset/v1/leaderworkerset_types.go``,
``config/crd/bases/``, ``pkg/utils/pod/pod_utils.go``, ``pkg/controllers/pod_controller.go``,
``pkg/schedulerprovider/volcano_provider.go``, troubleshooting page section 3) and
kubernetes-sigs/kueue v0.19.2 (``site/content/en/docs/tasks/run/leaderworkerset.md``,
``pkg/controller/jobs/leaderworkerset/leaderworkerset_reconciler.go``). What each says and
why one LWS per instance: docs/multinode.md.
"""

from __future__ import annotations

from disagg_operator.contracts import shape

MIN_VERSION = "v0.10.0"  # the LWS release the rendered objects were checked against
KUEUE_VERSION = "v0.19.2"
API_VERSION = "leaderworkerset.x-k8s.io/v1"
KIND = "LeaderWorkerSet"
PLURAL = "leaderworkersets"

# Labels LWS puts on a group's pods; the leader is worker 0.
LABEL_NAME = "leaderworkerset.sigs.k8s.io/name"
LABEL_GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
LABEL_WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
LEADER = "0"
# On the LWS's metadata: each group's pods in one domain of this topology key, one group
# per domain (LWS turns it into pod affinity and anti-affinity).
EXCLUSIVE_TOPOLOGY = "leaderworkerset.sigs.k8s.io/exclusive-topology"
# The env LWS gives every container of a group (no other; the name is the LABEL_NAME label).
ENV_LEADER_ADDRESS = "LWS_LEADER_ADDRESS"
ENV_GROUP_SIZE = "LWS_GROUP_SIZE"
ENV_WORKER_INDEX = "LWS_WORKER_INDEX"
RESTART_POLICY = "RecreateGroupOnPodRestart"
STARTUP_POLICY = "LeaderCreated"
MAX_SIZE = 64  # ours: the most pods one instance spans

# Volcano (through LWS's scheduler provider).
VOLCANO_SCHEDULER = "volcano"
VOLCANO_QUEUE = "scheduling.volcano.sh/queue-name"
# Kueue.
KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
KUEUE_REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
KUEUE_PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
KUEUE_GROUP = "kueue.x-k8s.io/podset-group-name"
KUEUE_MAX_NAME = 39
LWS_MAX_NAME = 51  # with one replica (see the module docstring)


def leader_pod(lws: str, group: int = 0) -> str:
    """The leader pod LWS makes for group ``group`` of LeaderWorkerSet ``lws``."""
    return f"{lws}-{group}"


def worker_pod(lws: str, worker: int, group: int = 0) -> str:
    """Worker ``worker`` (1 ..) of that group."""
    return f"{lws}-{group}-{worker}"


# What render writes (render/groups.py), as the v0.10.0 CRD types it. Its pod templates are
# core/v1's PodTemplateSpec as the CRD embeds it, Kubernetes 1.36's (k8s.io/api v0.36.3),
# every ObjectMeta inside cut to name, namespace, labels, annotations and finalizers (any
# other field is pruned).
_TEMPLATE = shape.builtin(shape.POD_TEMPLATE_SPEC, embedded_meta=shape.EMBEDDED_META)
CRD = "config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml"
SHAPE = shape.resource(
    f"kubernetes-sigs/lws {MIN_VERSION} {CRD}",
    shape.obj(
        {
            "replicas": shape.integer(minimum=0, maximum=1000000),
            "startupPolicy": shape.string(enum=["LeaderCreated", "LeaderReady"]),
            "leaderWorkerTemplate": shape.obj(
                {
                    "size": shape.integer(),
                    "restartPolicy": shape.string(
                        enum=[
                            "Default",
                            "RecreateGroupOnPodRestart",
                            "RecreateGroupAfterStart",
                            "None",
                        ]
                    ),
                    "leaderTemplate": _TEMPLATE,
                    "workerTemplate": _TEMPLATE,
                },
                required=["workerTemplate"],
            ),
        },
        required=["leaderWorkerTemplate"],
    ),
    required=(),
)
