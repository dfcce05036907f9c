#!/usr/bin/env bash
# End-to-end on a local kind cluster, for users with Docker:
#   1. create a kind cluster (or reuse it),
#   2. docker build the three images (operator, worker-cpu, worker-cuda),
#   3. kind load the two a CPU-only cluster runs,
#   4. helm install the chart,
#   5. kubectl apply examples/quickstart-cpu.yaml and wait for Ready,
#   6. run the P/D proxy in the cluster, port-forward it and send one completion with curl.
#
# Usage: scripts/e2e-kind.sh            (from anywhere; paths are relative to the repo)
# Environment:
#   CLUSTER=disagg-e2e    kind cluster name
#   BUILD_CUDA=1          also build the worker-cuda image (large; 0 skips it)
#   KEEP=1                keep the cluster afterwards (0 deletes it at the end)
#   TIMEOUT=600s          wait for the operator and for the deployment to become Ready
# Not run in CI (no Docker engine there): tests/scripts/test_scripts.py parses it and
# marks the real run `cluster`.
set -euo pipefail

CLUSTER="${CLUSTER:-disagg-e2e}"
BUILD_CUDA="${BUILD_CUDA:-1}"
KEEP="${KEEP:-1}"
TIMEOUT="${TIMEOUT:-600s}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION="$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$ROOT/charts/disagg/Chart.yaml")"
REGISTRY="ghcr.io/disagg-dev"
OPERATOR_IMAGE="$REGISTRY/disagg-operator:$VERSION"
WORKER_IMAGE="$REGISTRY/disagg-worker-cpu:$VERSION"
CUDA_IMAGE="$REGISTRY/disagg-worker-cuda:$VERSION"
SYSTEM_NS=disagg-system
DD=quickstart
PROXY="$DD-proxy"
LOCAL_PORT="${LOCAL_PORT:-18080}"

say() { printf '\n==> %s\n' "$*"; }
die() { printf 'e2e-kind: %s\n' "$*" >&2; exit 1; }

check_prerequisites() {
    local missing=()
    for tool in docker kind kubectl helm curl; do
        command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
    done
    if ((${#missing[@]})); then
        die "missing: ${missing[*]}. Install them (docker engine, kind >= 0.20, kubectl, helm >= 3.8, curl) and retry."
    fi
    docker info >/dev/null 2>&1 || die "docker is installed but its engine is not reachable (is the daemon running? can this user use it?)"
    # The example must name the image this script builds, or the cluster would pull another one.
    grep -q "image: $WORKER_IMAGE\$" "$ROOT/examples/quickstart-cpu.yaml" \
        || die "examples/quickstart-cpu.yaml does not use $WORKER_IMAGE; align the tag with charts/disagg/Chart.yaml appVersion"
}

create_cluster() {
    if kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
        say "reusing kind cluster $CLUSTER"
    else
        say "creating kind cluster $CLUSTER"
        kind create cluster --name "$CLUSTER" --wait 120s
    fi
    kubectl config use-context "kind-$CLUSTER" >/dev/null
}

build_images() {
    say "building images $VERSION"
    docker build --target operator -t "$OPERATOR_IMAGE" "$ROOT"
    docker build --target worker-cpu -t "$WORKER_IMAGE" "$ROOT"
    if [[ "$BUILD_CUDA" == 1 ]]; then
        docker build --target worker-cuda -t "$CUDA_IMAGE" "$ROOT"
    fi
    say "loading operator and worker-cpu images into kind (worker-cuda needs GPU nodes)"
    kind load docker-image --name "$CLUSTER" "$OPERATOR_IMAGE" "$WORKER_IMAGE"
}

install_operator() {
    say "helm install"
    helm upgrade --install disagg "$ROOT/charts/disagg" \
        --namespace "$SYSTEM_NS" --create-namespace \
        --set image.tag="$VERSION" --set image.pullPolicy=IfNotPresent --wait --timeout "$TIMEOUT"
    kubectl -n "$SYSTEM_NS" rollout status deployment/disagg --timeout "$TIMEOUT"
}

deploy_example() {
    say "applying examples/quickstart-cpu.yaml"
    kubectl apply -f "$ROOT/examples/quickstart-cpu.yaml"
    kubectl wait "disaggregateddeployment/$DD" --for=condition=Ready --timeout "$TIMEOUT" || {
        kubectl describe "disaggregateddeployment/$DD" >&2
        kubectl get pods -l "app.kubernetes.io/instance=$DD" -o wide >&2
        die "$DD did not become Ready; operator logs: kubectl -n $SYSTEM_NS logs deploy/disagg"
    }
    kubectl get disagg "$DD"
}

start_proxy() {
    say "starting the P/D proxy in the cluster"
    kubectl delete pod "$PROXY" --ignore-not-found --wait=true >/dev/null
    kubectl run "$PROXY" --image "$WORKER_IMAGE" --image-pull-policy IfNotPresent \
        --restart Never --port 8080 --command -- \
        disagg proxy --host 0.0.0.0 --port 8080 \
        --prefill "http://$DD-prefill:8000" --decode "http://$DD-decode:8000"
    kubectl wait "pod/$PROXY" --for=condition=Ready --timeout 120s
}

send_request() {
    say "port-forward and one completion"
    kubectl port-forward "pod/$PROXY" "$LOCAL_PORT:8080" >/dev/null &
    FORWARD_PID=$!
    local answer=""
    for _ in $(seq 1 30); do
        answer="$(curl -sf "http://127.0.0.1:$LOCAL_PORT/v1/completions" \
            -H 'Content-Type: application/json' \
            -d '{"model": "tiny", "prompt": "The quick brown fox", "max_tokens": 8}')" && break
        sleep 1
    done
    [[ -n "$answer" ]] || die "no answer from the proxy; kubectl logs pod/$PROXY"
    printf '%s\n' "$answer"
    grep -q '"choices"' <<<"$answer" || die "the answer has no choices"
    say "OK: a prefill pod computed the KV, the decode pod pulled it and answered"
}

cleanup() {
    if [[ -n "${FORWARD_PID:-}" ]]; then
        kill "$FORWARD_PID" 2>/dev/null || true
    fi
    if [[ "$KEEP" != 1 ]]; then
        kind delete cluster --name "$CLUSTER" || true
    fi
}

main() {
    check_prerequisites
    trap cleanup EXIT
    create_cluster
    build_images
    install_operator
    deploy_example
    start_proxy
    send_request
}

main "$@"
