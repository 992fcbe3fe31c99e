"""Train the classifiers and write their checkpoints (a few minutes on 2 cores).

    python tools/train_models.py            # all of them
    python tools/train_models.py lenet5 vit
"""

import sys

import torch

from gencc.workloads.models import RECIPES, train

if __name__ == "__main__":
    torch.set_num_threads(2)
    for name in sys.argv[1:] or list(RECIPES):
        train(name)
