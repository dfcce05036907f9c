"""The worker-cuda image's requirement list, from the disagg wheel's own metadata.

    python worker-cuda-requirements.py WHEEL EXTRA DROP ADD

Prints the wheel's base requirements plus those of EXTRA, with DROP left out and ADD
appended (the Dockerfile: the `worker` extra, nixl-cu12 swapped for nixl), so the list
never drifts from pyproject.toml.
"""

import re
import sys
import zipfile
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
