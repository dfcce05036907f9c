"""`disagg crd`: print the generated CustomResourceDefinition (CLI layer over crd.py).

disagg crd > crds/disagg.dev_disaggregateddeployments.yaml
"""

from __future__ import annotations

import argparse
import sys

from disagg_contract import commandline
from disagg_operator.commands import output
from disagg_operator.render import crd


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="disagg crd",
        description="Print the DisaggregatedDeployment CRD, generated from the models.",
        formatter_class=commandline.HelpFormatter,
    )
    output.add_argument(parser)
    args = parser.parse_args(argv)
    # YAML is the file in crds/, header and all; JSON is the object alone
    text = crd.to_yaml() if args.output == "yaml" else output.dumps([crd.build()], "json")
    sys.stdout.write(text)
    return 0
