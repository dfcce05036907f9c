#!/usr/bin/env bash
# mypy over the packages by their import names. The folders operator/ and worker/ are
# mapped to disagg_operator / disagg_worker by setuptools package-dir, which mypy cannot
# follow, so a link farm under build/ gives mypy the import names.
set -euo pipefail
bin=$(cd "${1:-.venv/bin}" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
farm=$root/build/typecheck
rm -rf "$farm" && mkdir -p "$farm"
ln -s "$root/operator" "$farm/disagg_operator"
ln -s "$root/worker" "$farm/disagg_worker"
cd "$farm"
# Whole packages: the project's mypy settings. Pure packages (no I/O): --strict. The pure
# packages are the source modules of the pure import contract in pyproject.toml; the
# worker's transfer and serve packages are --strict as a whole (the last run).
"$bin/mypy" --config-file "$root/pyproject.toml" -p disagg_operator -p disagg_worker
mapfile -t pure < <("$bin/python" -c '
import sys, tomllib
contracts = tomllib.load(open(sys.argv[1], "rb"))["tool"]["importlinter"]["contracts"]
pure = next(c for c in contracts if c["name"].startswith("Pure packages"))
print("\n".join(pure["source_modules"]))' "$root/pyproject.toml")
args=()
for p in "${pure[@]}"; do args+=(-p "$p"); done
"$bin/mypy" --config-file "$root/pyproject.toml" --strict "${args[@]}"
# The worker's data path (the transfer agent, the worker and its proxy): --strict too.
"$bin/mypy" --config-file "$root/pyproject.toml" --strict -p disagg_worker.transfer -p disagg_worker.serve
