"""The Gateway API Inference Extension's InferencePool (``inference.networking.k8s.io/v1``,
the GA API): what the operator renders of it, with llm-d, over a deployment's pods.

The one source of truth for this external contract: render, the API models and the
tests read it. Source: kubernetes-sigs/gateway-api-inference-extension at v1.5.0 (the
release that removed the ``inference.networking.x-k8s.io/v1alpha2`` CRD),
``config/crd/bases/inference.networking.k8s.io_inferencepools.yaml`` and
``api/v1/inferencepool_types.go``. The newest tag, v1.6.0, differs only in no longer
requiring ``spec.endpointPickerRef``, which render always writes.

:data:`SHAPE`: exactly what render writes of a pool, typed as the v1.5.0 CRD types it.
``endpointPickerRef.port`` is required by the type's CEL rule (``port`` is required when
the referent's ``kind`` is Service, its default, and render writes no ``kind``).
"""

from __future__ import annotations

from disagg_operator.contracts import shape

MIN_VERSION = "v1.5.0"  # the release the rendered pools were checked against
API_VERSION = "inference.networking.k8s.io/v1"
KIND = "InferencePool"
EPP_PORT = 9002  # the endpoint picker's gRPC port in upstream's manifests and charts
# A label value (upstream's LabelValue: 63 characters at most, alphanumeric at both ends).
LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"

_PORT = shape.obj({"number": shape.integer(minimum=1, maximum=65535)}, required=["number"])
CRD = "config/crd/bases/inference.networking.k8s.io_inferencepools.yaml"
SHAPE = shape.resource(
    f"kubernetes-sigs/gateway-api-inference-extension {MIN_VERSION} {CRD}",
    shape.obj(
        {
            "selector": shape.obj(
                {
                    "matchLabels": shape.string_map(
                        shape.string(pattern=LABEL_VALUE, minLength=0, maxLength=63),
                        minProperties=1,
                        maxProperties=64,
                    )
                },
                required=["matchLabels"],
            ),
            "targetPorts": shape.array(_PORT, minItems=1, maxItems=8),
            "endpointPickerRef": shape.obj(
                {
                    "name": shape.string(minLength=1, maxLength=253),
                    "port": _PORT,
                    "failureMode": shape.string(enum=["FailOpen", "FailClose"]),
                },
                required=["name", "port"],
            ),
        },
        required=["endpointPickerRef", "selector", "targetPorts"],
    ),
)
