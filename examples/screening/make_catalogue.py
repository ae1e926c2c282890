"""Generates the weights of each version of the screening policy and the catalogue that lists them.

    /usr/bin/python3 examples/screening/make_catalogue.py --weights-dir /srv/screening \
        --versions screen-v1,screen-v2 [--load-seconds screen-v3=4] > catalogue.json

Each version's weights (numpy, seeded by the version's name, so every worker builds the same
model) go to WEIGHTS_DIR/VERSION.npz; each version is an on-demand checkpoint whose setup loads
its weights (policy_setup.py), costing --resident-memory bytes to keep resident. Give the router
and every worker the same catalogue (--catalogue); the weights directory must be readable on every
worker at the same path.
"""

import argparse
import hashlib
import json
import os
import sys

import numpy

HERE = os.path.dirname(os.path.abspath(__file__))
DIM = 256


def weights(version, directory):
    """Writes VERSION.npz: the version's name, its weights and bias, and its flagging threshold."""
    seed = int.from_bytes(hashlib.sha256(version.encode()).digest()[:8], "big")
    rng = numpy.random.default_rng(seed)
    path = os.path.join(directory, f"{version}.npz")
    numpy.savez(
        path,
        version=numpy.array(version),
        w=rng.normal(0.0, 1.0, DIM),
        b=numpy.array(rng.normal(0.0, 0.1)),
        threshold=numpy.array(0.5),
    )
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--weights-dir", required=True)
    parser.add_argument("--versions", required=True, help="comma-separated version names")
    parser.add_argument("--resident-memory", type=int, default=64 * 1024 * 1024)
    parser.add_argument(
        "--load-seconds",
        action="append",
        default=[],
        metavar="VERSION=SECONDS",
        help="make a version's setup take this long (a stand-in for loading a large model)",
    )
    args = parser.parse_args()
    os.makedirs(args.weights_dir, exist_ok=True)
    slow = dict(item.split("=", 1) for item in args.load_seconds)
    with open(os.path.join(HERE, "policy_setup.py"), encoding="utf-8") as template:
        setup = template.read()
    checkpoints = [{"id": "checkpoint_0", "modules": [], "restoreCost": 60}]
    for version in [v for v in args.versions.split(",") if v]:
        path = os.path.abspath(weights(version, args.weights_dir))
        checkpoints.append(
            {
                "id": version,
                "modules": ["numpy"],
                "restoreCost": 20,
                "onDemand": True,
                "residentMemory": args.resident_memory,
                "setup": setup.replace("@WEIGHTS@", path).replace("@LOAD_SECONDS@", slow.get(version, "0")),
            }
        )
    catalogue = {
        "flavors": {"cpu": {"coldStartCost": 900, "basePackages": ["numpy"], "checkpoints": checkpoints}},
        "importCosts": {"numpy": 150},
        "defaultImportCost": 100,
    }
    json.dump(catalogue, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
