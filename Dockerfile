# syntax=docker/dockerfile:1.7
# Three images from one build context (scripts/e2e-kind.sh builds all three):
#   docker build --target operator    -t ghcr.io/disagg-dev/disagg-operator:0.1.0 .
#   docker build --target worker-cpu  -t ghcr.io/disagg-dev/disagg-worker-cpu:0.1.0 .
#   docker build --target worker-cuda -t ghcr.io/disagg-dev/disagg-worker-cuda:0.1.0 .
# Every image runs as uid/gid 65532 (non-root). See docs/security.md.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm
# CUDA runtime (libcudart on the loader path) for UCX's cuda_copy transport; the driver
# (libcuda) comes from the node through the NVIDIA container toolkit.
ARG CUDA_IMAGE=nvidia/cuda:12.8.1-runtime-ubuntu24.04
ARG TORCH_VERSION=2.13.0
ARG TORCH_CPU_INDEX=https://download.pytorch.org/whl/cpu
ARG TORCH_CUDA_INDEX=https://download.pytorch.org/whl/cu128
ARG APP_UID=65532

# ---------------------------------------------------------------------------------------
# wheel: build the disagg wheel once; derive the CUDA worker's requirement list from it.
FROM ${PYTHON_IMAGE} AS wheel
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator ./operator
COPY worker ./worker
RUN pip wheel --no-deps --wheel-dir /wheels .
# The `worker` extra names nixl-cu12 (the CPU-friendly NIXL build). The CUDA image wants the
# `nixl` package instead, so it installs the wheel with --no-deps and this list: the base
# requirements plus the worker extra, nixl-cu12 swapped for nixl. Read from the wheel's own
# metadata, so the list never drifts from pyproject.toml.
RUN python - /wheels/disagg-*.whl worker nixl-cu12 nixl > /wheels/worker-cuda.txt <<'EOF'
import re, sys, zipfile
from email.parser import HeaderParser

wheel, extra, drop, add = sys.argv[1:5]
with zipfile.ZipFile(wheel) as zf:
    meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
    headers = HeaderParser().parsestr(zf.read(meta).decode())
out = []
for req in headers.get_all("Requires-Dist") or []:
    spec, _, marker = req.partition(";")
    extras = re.findall(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker)
    name = re.split(r"[<>=!~\[ ]", spec.strip(), maxsplit=1)[0].lower()
    if (not extras or extra in extras) and name != drop:
        out.append(spec.strip())
print("\n".join([*out, add]))
EOF

# ---------------------------------------------------------------------------------------
# operator: kopf and the Kubernetes client only. No torch, no NIXL.
FROM ${PYTHON_IMAGE} AS operator
ARG APP_UID
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 HOME=/tmp
RUN useradd --system --uid "${APP_UID}" --user-group --no-create-home --home-dir /tmp \
    --shell /usr/sbin/nologin disagg
RUN --mount=type=bind,from=wheel,source=/wheels,target=/wheels \
    pip install "$(ls /wheels/disagg-*.whl)[operator]"
USER ${APP_UID}:${APP_UID}
EXPOSE 8080 9090
ENTRYPOINT ["disagg", "operator"]

# ---------------------------------------------------------------------------------------
# worker-cpu: CPU torch first, from the PyTorch CPU index, so that resolving the `worker`
# extra (torch, nixl-cu12) finds torch satisfied and never pulls a CUDA build. The
# constraint keeps that torch in place if a later requirement asks for torch again.
FROM ${PYTHON_IMAGE} AS worker-cpu
ARG APP_UID
ARG TORCH_VERSION
ARG TORCH_CPU_INDEX
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 HOME=/tmp
RUN useradd --system --uid "${APP_UID}" --user-group --no-create-home --home-dir /tmp \
    --shell /usr/sbin/nologin disagg
RUN pip install --index-url "${TORCH_CPU_INDEX}" "torch==${TORCH_VERSION}" \
    && echo "torch==${TORCH_VERSION}" > /etc/pip-constraints.txt
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
RUN --mount=type=bind,from=wheel,source=/wheels,target=/wheels \
    pip install --no-deps "$(ls /wheels/disagg-*.whl)" \
    && pip install --constraint /etc/pip-constraints.txt -r /wheels/worker-cuda.txt
USER ${APP_UID}:${APP_UID}
EXPOSE 8000 5600
ENTRYPOINT ["disagg"]
CMD ["worker", "--help"]
