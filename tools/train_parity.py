"""Train ParM parity models and write their checkpoints and records (a few minutes on 1 core).

    python tools/train_parity.py                 # every base model and k of PARITY_RECIPES
    python tools/train_parity.py convnet         # one base model, all its k
    python tools/train_parity.py lenet5 --k 2 3
"""

import argparse

import torch

from gencc.workloads.parity import PARITY_RECIPES, train_parity

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", default=list(PARITY_RECIPES), help="base models")
    ap.add_argument("--k", type=int, nargs="*", help="inputs per parity (default: the recipe's)")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    for name in args.names:
        for k in args.k or PARITY_RECIPES[name].ks:
            train_parity(name, k)
