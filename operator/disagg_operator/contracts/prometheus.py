"""The Prometheus Operator's PodMonitor and PrometheusRule: what the operator renders of them
and the rules those objects must follow.

The one source of truth for this external contract (render, validation, the docs and the
tests read it). Source: prometheus-operator/prometheus-operator at v0.93.0,
``example/prometheus-operator-crd/monitoring.coreos.com_podmonitors.yaml`` and
``monitoring.coreos.com_prometheusrules.yaml`` (both ``monitoring.coreos.com/v1``); their
rules sit above the shapes. Each alert watches its engine's own series
(:class:`AlertSeries`), so an alert no pod feeds is left out rather than silent forever.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from disagg_operator.contracts import shape

API_VERSION = "monitoring.coreos.com/v1"
MIN_VERSION = "v0.93.0"  # the release the objects were checked against
# A Prometheus Operator Duration, as the CRDs' pattern (monitoringv1.Duration) writes it.
DURATION = re.compile(
    r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
)


def job(namespace: str, name: str) -> str:
    """The ``job`` label of a PodMonitor's targets (no ``jobLabel`` set)."""
    return f"{namespace}/{name}"


@dataclass(frozen=True)
class AlertSeries:
    """The series of an engine's pods the alerts watch, names as scraped (a counter's
    ``_total`` included), None where the engine exports none: ``waiting``, a gauge of
    requests queued (read on prefill pods: DisaggPrefillQueueing); ``recomputed``, a
    counter of requests a decode computed from the prompt instead of reading their KV
    (DisaggDecodeRecomputing); ``transfer_failures``, a counter of failed KV transfers
    (on either pool: DisaggKVTransferFailing); ``failed_notifications``, of transfer
    notifications that could not be sent (DisaggKVNotificationsFailing);
    ``expired_leases``, of requests whose KV lease ran out before a decode read it
    (DisaggKVLeaseExpiring); ``notifications_after_expiry``, of reads finished after the
    lease had freed the blocks (DisaggKVReadAfterExpiry); ``failures_also_count``, a
    counter whose every increment ``transfer_failures`` counts too (subtracted from it, so
    one failure raises one alert); ``transfer_bytes`` and ``transfer_descriptors``, the
    ``_sum`` series of histograms of bytes and of descriptors per transfer
    (DisaggKVDescriptorBlowup); each read on both pools."""

    waiting: str | None = None
    recomputed: str | None = None
    transfer_failures: str | None = None
    failed_notifications: str | None = None
    expired_leases: str | None = None
    notifications_after_expiry: str | None = None
    failures_also_count: str | None = None
    transfer_bytes: str | None = None
    transfer_descriptors: str | None = None


# --- What render writes (render/monitoring.py), as the v0.93.0 CRDs type it --------------
# PodMonitor: spec.selector is required (a LabelSelector); each podMetricsEndpoints entry names
# a container port by name (a pod without a port of that name gives no target), with path,
# interval and scrapeTimeout as Durations; podTargetLabels copies pod labels onto the series,
# names sanitised by Prometheus (disagg.dev/role becomes disagg_dev_role). PrometheusRule:
# spec.groups is keyed by name (required, non-empty), a rule requires expr, `for` is a
# Duration; the groups are Prometheus' own rule-file groups, which `promtool check rules`
# judges (syntax, not whether a series exists: render leaves out an alert nothing feeds).
_CRDS = f"prometheus-operator/prometheus-operator {MIN_VERSION} example/prometheus-operator-crd"
_DURATION = shape.string(pattern=DURATION.pattern)
POD_MONITOR_SHAPE = shape.resource(
    f"{_CRDS}/monitoring.coreos.com_podmonitors.yaml",
    shape.obj(
        {
            "selector": shape.obj({"matchLabels": shape.string_map()}),
            "podMetricsEndpoints": shape.array(
                shape.obj({"port": shape.string(), "path": shape.string(), "interval": _DURATION})
            ),
            "podTargetLabels": shape.array(shape.string()),
        },
        required=["selector"],
    ),
)
PROMETHEUS_RULE_SHAPE = shape.resource(
    f"{_CRDS}/monitoring.coreos.com_prometheusrules.yaml",
    shape.obj(
        {
            "groups": shape.array(
                shape.obj(
                    {
                        "name": shape.string(minLength=1),
                        "rules": shape.array(
                            shape.obj(
                                {
                                    "alert": shape.string(),
                                    "expr": shape.INT_OR_STRING,
                                    "for": _DURATION,
                                    "labels": shape.string_map(),
                                    "annotations": shape.string_map(),
                                },
                                required=["expr"],
                            )
                        ),
                    },
                    required=["name"],
                )
            )
        }
    ),
)
# What the chart writes of a ServiceMonitor (charts/disagg/templates/servicemonitor.yaml,
# the operator's own metrics; the operator renders none).
SERVICE_MONITOR_SHAPE = shape.resource(
    f"{_CRDS}/monitoring.coreos.com_servicemonitors.yaml",
    shape.obj(
        {
            "selector": shape.obj({"matchLabels": shape.string_map()}),
            "namespaceSelector": shape.obj({"matchNames": shape.array(shape.string())}),
            "endpoints": shape.array(
                shape.obj(
                    {
                        "port": shape.string(),
                        "path": shape.string(),
                        "interval": _DURATION,
                        "scrapeTimeout": _DURATION,
                    }
                )
            ),
        },
        required=["endpoints", "selector"],
    ),
)
