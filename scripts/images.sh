#!/usr/bin/env bash
# `make images`: the operator, worker-cpu and vLLM CPU engine images from ./Dockerfile,
# built with podman, on a machine with or without an image registry.
#
#   scripts/images.sh [TARGET...]        (default: operator worker-cpu vllm-cpu)
#
# - podman, runc, debootstrap and iperf3 (`disagg bench pods`) are installed with apt-get
#   when missing (as root), and
#   podman reads the project's own settings (images/containers.conf via CONTAINERS_CONF).
# - The base: PYTHON_IMAGE when given (e.g. python:3.11-slim-bookworm where a registry is
#   reachable); else a Debian bookworm minbase made by debootstrap, with a venv on PATH
#   (localhost/disagg-base:bookworm), made once and kept in podman's store; the
#   debootstrap tree is kept as a tarball under .cache/images.
# - Builds use the host's network (PyPI) with the host's CA bundle ($SSL_CERT_FILE)
#   mounted, and take the CPU torch wheel from pip's find-links folder when one holds it
#   (the PyTorch index is not needed then). The Dockerfile is the same everywhere: only
#   build arguments differ.
# - worker-cuda needs a CUDA base image (CUDA_IMAGE): built only when named.
# - NIXL_VERSION pins vllm-cpu's NIXL (nixl-cu12==NIXL_VERSION) to the release the other
#   pool's image ships (spec.<role>.nixlVersion); unset: the newest.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export CONTAINERS_CONF="$ROOT/images/containers.conf"
REGISTRY=${REGISTRY:-ghcr.io/disagg-dev}
CACHE=${CACHE:-$ROOT/.cache/images}
BASE=localhost/disagg-base:bookworm
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/pyproject.toml" | head -1)
vllm_version=$(sed -n 's/^ARG VLLM_VERSION=//p' "$ROOT/Dockerfile")
torch_version=$(sed -n 's/^ARG TORCH_VERSION=//p' "$ROOT/Dockerfile")
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(operator worker-cpu vllm-cpu)

say() { printf 'images: %s\n' "$*" >&2; }

tag_of() {
    case $1 in
        operator) echo "$REGISTRY/disagg-operator:$version" ;;
        worker-cpu) echo "$REGISTRY/disagg-worker-cpu:$version" ;;
        worker-cuda) echo "$REGISTRY/disagg-worker-cuda:$version" ;;
        vllm-cpu) echo "$REGISTRY/disagg-vllm-cpu:$vllm_version" ;;
        *) say "unknown target $1 (operator, worker-cpu, worker-cuda, vllm-cpu)"; exit 2 ;;
    esac
}

install_tools() {
    local missing=()
    command -v podman >/dev/null || missing+=(podman)
    command -v runc >/dev/null || missing+=(runc)
    [ -n "${PYTHON_IMAGE:-}" ] || command -v debootstrap >/dev/null || missing+=(debootstrap)
    command -v iperf3 >/dev/null || missing+=(iperf3)  # disagg bench pods: the path's limit
    [ ${#missing[@]} -gt 0 ] || return 0
    if [ "$(id -u)" != 0 ]; then
        say "missing: ${missing[*]}; install them (apt-get install ${missing[*]}) or run as root"
        exit 1
    fi
    say "installing ${missing[*]} (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 \
        || { apt-get update -q >/dev/null && apt-get install -y -q "${missing[@]}" >/dev/null; }
}

make_base() {
    if podman image exists "$BASE"; then
        say "base $BASE (kept from an earlier build)"
        return
    fi
    local tarball="$CACHE/bookworm-minbase.tar" started=$SECONDS
    if [ ! -s "$tarball" ]; then
        say "base: debootstrap bookworm minbase from $MIRROR (about a minute) ..."
        local tree
        tree=$(mktemp -d)
        debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
            bookworm "$tree" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
            || { tail -20 "$CACHE/debootstrap.log" >&2; rm -rf "$tree"; exit 1; }
        rm -rf "$tree"/var/cache/apt/archives/*.deb "$tree"/var/lib/apt/lists/*
        tar -C "$tree" -cf "$tarball.part" . && mv "$tarball.part" "$tarball"
        rm -rf "$tree"
    fi
    local context
    context=$(mktemp -d)
    podman import "$tarball" localhost/disagg-bookworm-minbase >/dev/null
    # a venv on PATH gives pip and `python` where python:3.11-slim has them
    printf '%s\n' 'FROM localhost/disagg-bookworm-minbase' \
        'RUN python3 -m venv /opt/venv' \
        'ENV VIRTUAL_ENV=/opt/venv PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        | podman build --quiet --network none -t "$BASE" -f - "$context" >/dev/null
    rmdir "$context"
    say "base $BASE made in $((SECONDS - started)) s"
}

# pip's find-links folders (its config, then the environment) holding this CPU torch
torch_wheels() {
    local dirs
    dirs="$(${PIP:-pip} config get global.find-links 2>/dev/null || true) ${PIP_FIND_LINKS:-}"
    for d in $dirs; do
        d=${d#file://}
        if compgen -G "$d/torch-${torch_version}+cpu-*.whl" >/dev/null; then
            echo "$d"
            return
        fi
    done
}

main() {
    mkdir -p "$CACHE"
    install_tools
    local base=${PYTHON_IMAGE:-}
    if [ -z "$base" ]; then
        make_base
        base=$BASE
    fi
    # what the build copies, hashed: a changed file rebuilds what depends on it
    local digest
    digest=$(cd "$ROOT" && find pyproject.toml README.md operator worker contract \
        scripts/worker-cuda-requirements.py scripts/vllm-cpu-finish.sh -type f \
        ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 | sort -z | xargs -0 sha256sum \
        | sha256sum | cut -c1-16)
    local finish
    finish=$(sha256sum "$ROOT/scripts/vllm-cpu-finish.sh" | cut -c1-16)
    local args=(--network host --layers --build-arg "PYTHON_IMAGE=$base"
        --build-arg "SOURCE_DIGEST=$digest" --build-arg "FINISH_DIGEST=$finish")
    [ -z "${CUDA_IMAGE:-}" ] || args+=(--build-arg "CUDA_IMAGE=$CUDA_IMAGE")
    [ -z "${NIXL_VERSION:-}" ] || args+=(--build-arg "NIXL_VERSION=$NIXL_VERSION")
    if [ -n "${SSL_CERT_FILE:-}" ] && [ -f "$SSL_CERT_FILE" ]; then
        args+=(--volume "$SSL_CERT_FILE:/etc/ssl/certs/ca-certificates.crt:ro")
    fi
    local wheels
    wheels=$(torch_wheels)
    if [ -n "$wheels" ]; then
        say "torch ${torch_version}+cpu from $wheels (its dependencies from PyPI)"
        args+=(--volume "$wheels:/host-wheels:ro" --build-arg TORCH_FIND_LINKS=/host-wheels
            --build-arg TORCH_CPU_INDEX=https://pypi.org/simple)
    fi
    for target in "${targets[@]}"; do
        local tag started=$SECONDS
        tag=$(tag_of "$target")
        say "building $target → $tag ..."
        podman build "${args[@]}" --target "$target" -t "$tag" -f "$ROOT/Dockerfile" "$ROOT" \
            >"$CACHE/build-$target.log" 2>&1 \
            || { tail -30 "$CACHE/build-$target.log" >&2; say "$target failed (log: $CACHE/build-$target.log)"; exit 1; }
        local size
        size=$(podman image inspect --format '{{.Size}}' "$tag")
        say "built $tag in $((SECONDS - started)) s, $((size / 1000000)) MB"
    done
}

main
