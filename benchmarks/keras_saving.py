"""A/B: a `.keras` save of the quick-start's model with Keras 3.15's
attribute skipsets (rebuilt for every object walked) vs with them kept
(`keras_gmlp.training.keras_patches.install_saving_skipset_cache`).

Issue 12, the quick-start's time. A `cProfile` of the JAX quick-start
(`keras-gmlp train-image-classifier --dataset digits`; an idle 2-core AMD
EPYC, family 25) spent 5.5 of 29.9 s in the callbacks' epoch ends, 4.8 s
of it in 55 `.keras` saves (`last.keras` every epoch, `best.keras` when it
improves, the `BackupAndRestore` backup every epoch). 1.7 s of those went
to `saving_lib.get_attr_skipset`, which builds a reference `Layer()` (or
`Optimizer`, `Metric`, `Loss`) for every object saving walks, 2,160
`Layer()`s in the run: it writes its set under one global key and reads
another. TensorFlow's run spent about as long.

Both forms in one process: the quick-start's model (the digits job's
task, built by the job's `build_model`, compiled with the job's AdamW at
a constant rate, its loss and its metrics, one `fit` step on random
digits-shaped images) saved
to a `.keras` file, in interleaved rounds (`common.alternate`), `x keras`
Keras' seconds per save over the kept skipsets' (above 1: faster).

Usage:
    KERAS_BACKEND=jax python benchmarks/keras_saving.py --rounds 5
Results: benchmarks/results/keras_saving<suffix>_<backend>.json
"""

import argparse
import functools
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

BASELINE = "keras"
CANDIDATE = "kept_skipsets"


def quickstart_model():
    """The digits job's task, compiled with the job's optimizer (at a
    constant rate), loss and metrics, trained one step."""
    import keras
    import numpy as np

    from keras_gmlp.training.optimizers import adamw
    from keras_gmlp.workflows.image_classification import classification_metrics

    model = common.digits_job_task()
    model.compile(
        optimizer=adamw(3e-3, model=model),
        loss=keras.losses.CategoricalCrossentropy(from_logits=True),
        metrics=classification_metrics(10),
    )
    rng = np.random.default_rng(0)
    images = rng.uniform(0, 255, (64, 16, 16, 1)).astype("float32")
    labels = np.eye(10, dtype="float32")[rng.integers(0, 10, 64)]
    model.fit(images, labels, epochs=1, verbose=0)
    return model


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n", 1)[1],
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--suffix", default="", help="results file suffix")
    args = parser.parse_args(argv)
    from keras.src.saving import saving_lib

    run = common.header()
    model = quickstart_model()
    folder = tempfile.mkdtemp(prefix="keras_saving_")
    path = os.path.join(folder, "model.keras")
    keras_skipset = saving_lib.get_attr_skipset
    kept_skipset = functools.cache(keras_skipset)

    def save_with(skipset):
        def save():
            saving_lib.get_attr_skipset = skipset
            try:
                model.save(path)
            finally:
                saving_lib.get_attr_skipset = keras_skipset

        return save

    try:
        times = common.alternate(
            {
                BASELINE: save_with(keras_skipset),
                CANDIDATE: save_with(kept_skipset),
            },
            args.rounds,
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    row = common.ab_row(times[BASELINE], times[CANDIDATE], BASELINE, CANDIDATE)
    rows = [dict(row, measure="save", shape="quickstart digits model")]
    columns = ["shape", "measure"] + list(row)
    common.finish_report(
        run,
        rows,
        columns,
        f"keras_saving{args.suffix}_{run['backend']}",
        rounds=args.rounds,
    )


if __name__ == "__main__":
    main()
