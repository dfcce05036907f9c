"""`disagg crd`: print the generated CustomResourceDefinition (CLI layer over crd.py).

disagg crd > crds/disagg.dev_disaggregateddeployments.yaml
"""

from __future__ import annotations

import argparse
import sys

from disagg_operator.render import crd


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="disagg crd",
        description="Print the DisaggregatedDeployment CRD (YAML), generated from the models.",
    )
    parser.parse_args(argv)
    sys.stdout.write(crd.to_yaml())
    return 0
