"""Does the tf.data image pipeline feed the model with headroom?

Measures, in one run and on the same batches shape:

1. `pipeline`: images/s of the training input pipeline alone (decode,
   resize, augmentation, batching), iterated without a model;
2. `train_step`: images/s of the training step alone, fed one batch that
   is already in memory (`model.train_on_batch`);
3. `fit`: images/s of `model.fit` fed by the pipeline (both compete for
   the same cores, as in a real run), after 3 warm-up batches.

Headroom = pipeline / train_step (> 1: the pipeline outruns the model);
fit / train_step close to 1 means the pipeline does not slow training.

Two set-ups: the README's `digits` quick-start (16 x 16, no heavy
augmentation), and CIFAR-10 in its binary format (written here from random
pixels: same sizes and decode path as the real files) with the paper's
augmentation (RandAugment 2 ops, MixUp/CutMix, flips, pad-and-crop) and the
`gmlp_micro4_32` model.

OpenMP's wait policy under torch (`--quick`, 8 batches, an idle 2-core
Xeon with AVX-512 and AMX, one run each; `fit` images/s): with
`OMP_WAIT_POLICY=PASSIVE` (the package's default) digits 2,059, CIFAR-10
with the paper's augmentation 521; with torch's own spin
(`GOMP_SPINCOUNT=300000`) 2,834 (1.38x) and 345 (0.66x);
`GOMP_SPINCOUNT=30000` 2,207 and 396. Spinning threads help a step fed
from memory or by a light pipeline and hurt one whose pipeline needs
the cores, which is why the package's default stays `PASSIVE` (the
recipes run the paper's augmentation).

Usage:
    KERAS_BACKEND=jax python benchmarks/image_pipeline.py [--quick]
Results: benchmarks/results/image_pipeline_<backend><suffix>.json
"""

import argparse
import json
import os
import platform
import tempfile
import time

# As in the recipe: PyTorch's spinning OpenMP threads fight tf.data's.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import keras
import numpy as np

from keras_gmlp import models
from keras_gmlp.data import images
from keras_gmlp.data.augment import AugmentConfig
from keras_gmlp.data.image_sources import load_images
from keras_gmlp.training import reuse_freed_memory
from keras_gmlp.training.optimizers import adamw

RESULTS = os.path.join(os.path.dirname(__file__), "results")


def write_cifar_binaries(folder, records_per_file):
    rng = np.random.default_rng(0)
    for file in [f"data_batch_{i}.bin" for i in range(1, 6)] + [
        "test_batch.bin"
    ]:
        rows = rng.integers(0, 256, (records_per_file, 3073), dtype=np.uint8)
        rows[:, 0] = rng.integers(0, 10, records_per_file)
        rows.tofile(os.path.join(folder, file))


def setups(folder, quick):
    write_cifar_binaries(folder, 512 if quick else 2048)
    return {
        "digits": {
            "data": load_images("digits"),
            "image_size": (16, 16),
            "batch_size": 64,
            "augment": AugmentConfig(
                flip=False, randaugment_ops=0, mixup=0, cutmix=0, translate=0.1
            ),
            "model": {
                "image_size": 16,
                "patch_size": 4,
                "num_layers": 4,
                "hidden_dim": 64,
                "ffn_dim": 256,
            },
        },
        "cifar10_paper_augmentation": {
            "data": load_images("cifar10", folder),
            "image_size": (32, 32),
            "batch_size": 128,
            "augment": AugmentConfig(crop_padding=4),
            "model": {"preset": "gmlp_micro4_32"},
        },
    }


def images_per_second(run, batches, batch_size):
    start = time.perf_counter()
    run(batches)
    return batches * batch_size / (time.perf_counter() - start)


class BatchClock(keras.callbacks.Callback):
    """Times `fit`'s batches after the first few (tracing, buffers)."""

    def __init__(self, warmup_batches):
        super().__init__()
        self.warmup_batches = warmup_batches
        self.times = []

    def on_train_batch_end(self, batch, logs=None):
        self.times.append(time.perf_counter())

    def images_per_second(self, batch_size):
        times = self.times[self.warmup_batches - 1 :]
        return (len(times) - 1) * batch_size / (times[-1] - times[0])


def measure(setup, batches):
    data, batch_size = setup["data"], setup["batch_size"]
    dataset = images.batches(
        data,
        "train",
        batch_size,
        setup["image_size"],
        True,
        setup["augment"],
        seed=0,
    ).repeat()
    iterator = iter(dataset)
    next(iterator)  # Builds the pipeline, fills caches and buffers.

    def iterate(count):
        for _ in range(count):
            next(iterator)

    pipeline = images_per_second(iterate, batches, batch_size)

    config = dict(setup["model"])
    preset = config.pop("preset", None)
    model = models.image_classifier(
        preset,
        num_classes=data.num_classes,
        num_channels=data.num_channels,
        **config,
    )
    model.compile(
        optimizer=adamw(1e-3, model=model),
        loss=keras.losses.CategoricalCrossentropy(from_logits=True),
        # The pipeline's labels are one-hot (MixUp / CutMix); the task's
        # default metric is the sparse accuracy.
        metrics=[keras.metrics.CategoricalAccuracy()],
    )
    x, y = (value.numpy() for value in next(iterator))
    model.train_on_batch(x, y)  # Compiles.

    def step(count):
        for _ in range(count):
            model.train_on_batch(x, y)

    train_step = images_per_second(step, batches, batch_size)
    clock = BatchClock(warmup_batches=3)
    model.fit(
        dataset,
        steps_per_epoch=batches + 3,
        epochs=1,
        verbose=0,
        shuffle=False,
        callbacks=[clock],
    )
    fitted = clock.images_per_second(batch_size)
    return {
        "batch_size": batch_size,
        "batches": batches,
        "pipeline_images_per_second": round(pipeline, 1),
        "train_step_images_per_second": round(train_step, 1),
        "fit_images_per_second": round(fitted, 1),
        "headroom_pipeline_over_step": round(pipeline / train_step, 2),
        "fit_over_step": round(fitted / train_step, 3),
        "parameters": model.count_params(),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--batches", type=int, help="timed per measure (40; --quick: 8)"
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--reuse-freed-memory",
        action="store_true",
        help="call keras_gmlp.training.reuse_freed_memory() first, as the "
        "keras-gmlp command does (JAX only)",
    )
    parser.add_argument("--suffix", default="", help="of the results file")
    args = parser.parse_args()
    if args.reuse_freed_memory:
        reuse_freed_memory()
    batches = args.batches or (8 if args.quick else 40)
    keras.utils.set_random_seed(0)
    results = {
        "backend": keras.config.backend(),
        "keras_version": keras.__version__,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "reuse_freed_memory": args.reuse_freed_memory,
        "setups": {},
    }
    with tempfile.TemporaryDirectory() as folder:
        for name, setup in setups(folder, args.quick).items():
            results["setups"][name] = measure(setup, batches)
            print(name, json.dumps(results["setups"][name]), flush=True)
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(
        RESULTS, f"image_pipeline_{keras.config.backend()}{args.suffix}.json"
    )
    with open(path, "w") as file:
        json.dump(results, file, indent=2)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
