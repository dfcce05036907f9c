"""What a deployment's ``spec.tracing`` tells each process that exports spans: the
OpenTelemetry SDK variables (opentelemetry-specification v1.60.0,
configuration/sdk-environment-variables.md), the same for the router, the reference
worker and vLLM, so one sampling decision holds across a request's hops.
"""

from __future__ import annotations

from disagg_operator.api import DeploymentSpec

ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
SAMPLER = "parentbased_traceidratio"  # a caller's decision kept, new traces by ratio


def sampler_env(spec: DeploymentSpec) -> dict[str, str]:
    """The sampler variables (none without ``spec.tracing``)."""
    if spec.tracing is None:
        return {}
    ratio = f"{spec.tracing.sampling_ratio:g}"
    return {"OTEL_TRACES_SAMPLER": SAMPLER, "OTEL_TRACES_SAMPLER_ARG": ratio}


def env(spec: DeploymentSpec) -> dict[str, str]:
    """The endpoint and sampler variables of a process that reads them all (the reference
    worker)."""
    if spec.tracing is None:
        return {}
    return {ENDPOINT_ENV: spec.tracing.endpoint, **sampler_env(spec)}
