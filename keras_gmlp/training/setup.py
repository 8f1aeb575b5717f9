"""The shared start and fit loop of the training jobs."""

import os
import warnings

import keras

from keras_gmlp.optimizers import build_optimizer_before_tracing
from keras_gmlp.training.callbacks import EpochEndHook
from keras_gmlp.training.callbacks import restore_point
from keras_gmlp.training.callbacks import training_callbacks
from keras_gmlp.training.distribution import get_distribution
from keras_gmlp.training.distribution import split_cpu_for_tests
from keras_gmlp.training.results import WallClock


def run_distribution(strategy="auto", split_cpu=None):
    """The distribution of a run: a strategy, maybe on a split CPU.

    Call it first: TensorFlow's multi-worker set-up and logical devices
    must come before TensorFlow runs anything.

    Args:
        strategy: str. One of `keras_gmlp.training.STRATEGIES`. Defaults
            to `"auto"`.
        split_cpu: int or `None`. Split the host CPU into this many devices
            (`split_cpu_for_tests`) and distribute over them. Defaults to
            `None`.

    Returns:
        A `keras_gmlp.training.Distribution`.
    """
    devices = None
    if split_cpu:
        devices = split_cpu_for_tests(split_cpu)
    return get_distribution(strategy, devices)


def configure_run(seed=0, mixed_precision="none"):
    """Seeds every random generator and sets the dtype policy.

    Args:
        seed: int. Seed of Python's, numpy's and the backend's generators.
            Defaults to `0`.
        mixed_precision: str. `"none"`, `"mixed_float16"` or
            `"mixed_bfloat16"`. Defaults to `"none"`.
    """
    keras.utils.set_random_seed(seed)
    policy = "float32" if mixed_precision == "none" else mixed_precision
    keras.config.set_dtype_policy(policy)


def fit(
    model,
    train_data,
    validation_data,
    epochs,
    output_dir,
    distribution=None,
    steps_per_epoch=None,
    monitor="val_accuracy",
    mode="max",
    tensorboard=True,
    callbacks=None,
    verbose=1,
    endless_stream=False,
):
    """Trains `model` with the standard callbacks; resumes a killed run.

    Started again with the same `output_dir` after an interruption (even
    `kill -9`), it continues from the last completed epoch, and the
    returned history covers every epoch of the run. It restores the
    backup, else the backup's previous copy, else `last.keras` (the only
    state a finished run keeps, so a finished run asked for more epochs
    continues from it), and prints which (`restore_point`).

    Args:
        model: a compiled `keras.Model`.
        train_data: `tf.data.Dataset` of batches.
        validation_data: `tf.data.Dataset` of batches, or `None`.
        epochs: int. Total epochs of the run.
        output_dir: str. Where backups, checkpoints, history and logs go.
        distribution: `Distribution` or `None`.
        steps_per_epoch: int or `None`. Defaults to a full pass.
        monitor: str. Metric of the best checkpoint.
        mode: str. `"max"` or `"min"`.
        tensorboard: bool. Whether to write TensorBoard logs.
        callbacks: list or `None`. Extra callbacks, run after the standard
            ones.
        verbose: int. Keras' `verbose` (1 = progress bar).
        endless_stream: bool. Whether `train_data` is one endless
            (repeated) stream cut into epochs of `steps_per_epoch` batches.
            A resumed run then skips the batches its completed epochs
            trained on, so it continues the stream instead of seeing its
            start again (the skipped batches are read, not trained on).
            Defaults to `False`: every epoch is a fresh pass.

    Returns:
        A tuple `(history, wall_time)`: `{metric: [value per epoch]}` over
        the whole run, and the seconds of all its attempts.

    Raises:
        RunFolderError: when `output_dir` holds completed epochs but no
            readable backup or `last.keras`.
    """
    is_chief = distribution.is_chief if distribution else True
    worker = distribution.worker_index if distribution else 0
    point = restore_point(output_dir, worker)
    if point is not None:
        print(
            f"Restoring epoch {point.epoch} of {epochs} from "
            f"{os.path.join(output_dir, point.note)}.",
            flush=True,
        )
    standard, history = training_callbacks(
        output_dir,
        monitor=monitor if validation_data is not None else "loss",
        mode=mode if validation_data is not None else "min",
        tensorboard=tensorboard,
        is_chief=is_chief,
        worker_index=worker,
        restore_from=point,
    )
    clock_dir = output_dir
    if not is_chief:
        clock_dir = os.path.join(output_dir, "workers", str(worker))
    clock = WallClock(clock_dir, resume=point is not None)
    if endless_stream and point is not None:
        if not steps_per_epoch:
            raise ValueError(
                "endless_stream=True needs steps_per_epoch; received "
                f"steps_per_epoch={steps_per_epoch!r}."
            )
        skipped = point.epoch * steps_per_epoch
        if skipped:
            print(f"Resuming: skipping the {skipped} batches trained on.")
            train_data = train_data.skip(skipped)
    build_optimizer_before_tracing(model)
    if distribution is not None:
        train_data = distribution.prepare_dataset(train_data)
        if validation_data is not None:
            validation_data = distribution.prepare_dataset(validation_data)
    with warnings.catch_warnings():
        # Keras warns once when a dataset of unknown length (one that skips
        # corrupt records) ends; the end of a validation pass is expected.
        warnings.filterwarnings(
            "ignore", message="Your input ran out of data", category=UserWarning
        )
        model.fit(
            train_data,
            validation_data=validation_data,
            epochs=epochs,
            steps_per_epoch=steps_per_epoch,
            callbacks=standard
            + [EpochEndHook(clock.update)]
            + (callbacks or []),
            verbose=verbose,
            shuffle=False,  # The tf.data pipelines shuffle.
        )
    clock.update()
    return history.history, clock.elapsed()
