"""Scripts every model kind of dgld.models.KINDS at every depth from 1 to
MAX_LAYERS into <out>/<kind>-<layers>.pt (built by meson beside
trainer-host; docs/models.md), with small widths that trainer-host's
configure() call replaces. Each file is written under a temporary name and
renamed.

    python3 -m dgld.models.script --out DIR"""

import argparse
import os
import sys

import torch

from . import KINDS, MAX_LAYERS


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True, help="directory for the .pt files")
    a = p.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    for name, cls in KINDS.items():
        for layers in range(1, MAX_LAYERS + 1):
            torch.manual_seed(0)
            model = cls(in_feats=3, n_hidden=4, n_classes=2, num_layers=layers)
            path = os.path.join(a.out, f"{name}-{layers}.pt")
            torch.jit.save(torch.jit.script(model), path + ".tmp")
            os.replace(path + ".tmp", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
