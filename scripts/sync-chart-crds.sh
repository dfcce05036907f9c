#!/usr/bin/env bash
# Copy the generated CRDs (crds/, made by `disagg crd`) into the Helm chart's crds/ folder.
# tests/chart/test_crds_sync.py fails with this command when the two drift.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="$root/crds"
dst="$root/charts/disagg/crds"
mkdir -p "$dst"
shopt -s nullglob
sources=("$src"/*.yaml)
if ((${#sources[@]} == 0)); then
    echo "sync-chart-crds: no CRD in $src; generate it first with: disagg crd" >&2
    exit 1
fi
rm -f "$dst"/*.yaml
for file in "${sources[@]}"; do
    name="$(basename "$file")"
    {
        echo "# Copied from crds/$name by scripts/sync-chart-crds.sh; do not edit."
        cat "$file"
    } > "$dst/$name"
    echo "synced charts/disagg/crds/$name"
done
