"""How local a trained image model's spatial weights are, against nulls.

Reads a run of `recipes/image_classification.py` and prints, per block, the
`keras_gmlp.plots.spatial_locality` ratio (below 1: each token's row of `W`
weighs nearby patches more; about 1: no preference) of:

- the trained model (with each centring of the rows);
- an untrained model of the same configuration;
- the trained `W` with its tokens relabelled by random permutations, the
  same numbers on a scrambled grid. This is also what a model trained on
  images with their patches in a fixed random order would give: with a
  dense `W` and no position embeddings, such a model is the plain one with
  `W` relabelled (the stem, the channel layers and the mean pooling treat
  every token alike, and `W`'s initialisation is i.i.d.).

Usage:
    python benchmarks/spatial_locality.py runs/digits32 [--output FILE]
"""

import argparse
import json
import os

import keras
import numpy as np

from keras_gmlp import models
from keras_gmlp import plots


def weights(model):
    """Each block's full `(n, n)` spatial weight, as numpy."""
    return [
        keras.ops.convert_to_numpy(layer.spatial_gating_unit.spatial_weight())
        for layer in getattr(model, "backbone", model).layers
        if layer.name.startswith("block_")
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--permutations", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default=None, help="Also write JSON here.")
    args = parser.parse_args()
    with open(os.path.join(args.run_dir, "results.json")) as file:
        run = json.load(file)
    model = keras.saving.load_model(os.path.join(args.run_dir, "model.keras"))
    grid = plots.patch_grid(model)
    config = dict(run["model_config"])
    keras.utils.set_random_seed(args.seed)
    untrained = models.image_classifier(config.pop("preset"), **config)
    rng = np.random.default_rng(args.seed)
    trained = weights(model)
    relabelled = []
    for _ in range(args.permutations):
        order = rng.permutation(grid[0] * grid[1])
        relabelled.append(
            [
                plots.spatial_locality(w[order][:, order], grid)["ratio"]
                for w in trained
            ]
        )
    relabelled = np.array(relabelled)
    report = {
        "run_dir": args.run_dir,
        "grid": grid,
        "val_accuracy": run["metrics"]["val_accuracy"],
        "trained": {
            str(center): plots.block_locality(model, grid, center)
            for center in ("median", "mean", None)
        },
        "untrained": plots.block_locality(untrained, grid),
        "relabelled_mean": relabelled.mean(axis=0).tolist(),
        "relabelled_std": relabelled.std(axis=0).tolist(),
        "permutations": args.permutations,
        "backend": keras.config.backend(),
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.output:
        with open(args.output, "w") as file:
            file.write(text + "\n")


if __name__ == "__main__":
    main()
