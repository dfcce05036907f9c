#!/usr/bin/env bash
# mypy over the packages by their import names (the folders operator/, worker/, contract/
# and tools/ hold them; pyproject.toml's mypy_path points there). Whole packages: the project's mypy
# settings. Pure packages (no I/O): --strict; they are the source modules of the pure
# import contract in pyproject.toml. The worker's transfer and serve packages (the data
# path) are --strict as a whole.
set -euo pipefail
bin=$(cd "${1:-.venv/bin}" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
"$bin/mypy" -p disagg_operator -p disagg_worker -p disagg_contract -p disagg_tools
mapfile -t pure < <("$bin/python" -c '
import sys, tomllib
contracts = tomllib.load(open(sys.argv[1], "rb"))["tool"]["importlinter"]["contracts"]
pure = next(c for c in contracts if c["name"].startswith("Pure packages"))
print("\n".join(pure["source_modules"]))' "$root/pyproject.toml")
args=()
for p in "${pure[@]}"; do args+=(-p "$p"); done
"$bin/mypy" --strict "${args[@]}"
"$bin/mypy" --strict -p disagg_worker.transfer -p disagg_worker.serve
