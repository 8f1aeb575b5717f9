"""The steps every training job shares, from flags to the fitted model.

Each job (`image_classification`, `pretraining`, `text_classification`)
reads its flags with the functions of `flag_readers`, then runs
`start` (the distribution first, then the seed and the dtype policy),
`run_in_folder` (the run's folder checked and locked: the same
configuration resumes or is found complete, another is refused),
`compile_task` (AdamW with the run's weight decay, clipping and XLA
setting) and `fit_task` (the resumable fit of
`keras_gmlp.training.setup.fit` with the run's epochs, folder, logs and
verbosity). Each takes the job's run configuration (a
`keras_gmlp.training.run_config.TrainingConfig`), never the argparse
namespace, and hands its fields on as explicit arguments.
"""

import argparse
import json
import os

from keras_gmlp.optimizers import adamw
from keras_gmlp.training import arguments
from keras_gmlp.training.setup import configure_run
from keras_gmlp.training.setup import fit
from keras_gmlp.training.setup import run_distribution
from keras_gmlp.workflows import run_folder


def flag_readers(description, config_class, add_arguments):
    """A job's `(build_parser, config_from_argv)` functions.

    `build_parser()` returns the job's `ArgumentParser` (its description,
    the flags `add_arguments(parser)` adds, defaults in the help);
    `config_from_argv(argv=None)` parses `argv` (defaults to
    `sys.argv[1:]`) into a `config_class`.

    Args:
        description: str. The job's description.
        config_class: a `TrainingConfig` subclass.
        add_arguments: callable. Adds the job's flags to a parser and
            returns it.
    """

    def build_parser():
        parser = argparse.ArgumentParser(
            description=description,
            formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        )
        return add_arguments(parser)

    def config_from_argv(argv=None):
        args = build_parser().parse_args(argv)
        return arguments.config_from_args(config_class, args)

    build_parser.__doc__ = "The job's `ArgumentParser`."
    config_from_argv.__doc__ = (
        f"The `{config_class.__name__}` of command-line flags `argv`."
    )
    return build_parser, config_from_argv


def start(config):
    """Starts a run; returns its `keras_gmlp.training.Distribution`.

    The strategy comes first: TensorFlow's multi-worker set-up and logical
    devices must precede anything TensorFlow runs. Then every generator is
    seeded and the dtype policy set.
    """
    distribution = run_distribution(config.strategy, config.split_cpu)
    configure_run(config.seed, config.mixed_precision)
    return distribution


def run_in_folder(job, config, distribution, train):
    """Runs `train()` as the one run of `config.output_dir`.

    The chief takes the folder (`run_folder.claim`: its lock, held until
    `train` returns or raises, and the check of the run already there).
    A folder holding this run finished is not trained again: a printed
    line says where its results are. An unfinished one (or one with
    fewer epochs than `config.epochs`) is resumed, and a line says so.
    Other workers of a multi-process run write nothing here: they check
    the folder without the lock (unless `config.overwrite`, whose move
    the chief makes) and follow the chief.

    Args:
        job: str. The job's name, one of `run_folder.JOBS`.
        config: `TrainingConfig`. Its `output_dir`, `epochs` and
            `overwrite`.
        distribution: `keras_gmlp.training.Distribution`.
        train: callable. Trains the run; returns its results.

    Returns:
        What `train()` returns, or the `results.json` of the complete run
        (`None` on a worker that is not the chief).

    Raises:
        RunFolderError: when the folder holds another run, or another
            process is writing it.
    """
    output_dir = config.output_dir
    if not distribution.is_chief:
        state = run_folder.RESUME
        if not config.overwrite:
            state = run_folder.run_state(output_dir, job, config)
        return None if state == run_folder.COMPLETE else train()
    lock, state = run_folder.claim(output_dir, job, config, config.overwrite)
    with lock:
        if state == run_folder.COMPLETE:
            path = os.path.join(output_dir, run_folder.RESULTS_FILE)
            epochs = (
                "1 epoch" if config.epochs == 1 else f"{config.epochs} epochs"
            )
            print(
                f"{output_dir} holds this run, complete after {epochs}: "
                f"its results are in {path} "
                "(more --epochs continue it; --overwrite trains it again).",
                flush=True,
            )
            with open(path) as file:
                return json.load(file)
        if state == run_folder.RESUME:
            print(
                f"Resuming the run in {output_dir} (the same "
                f"configuration), to {config.epochs} epochs.",
                flush=True,
            )
        return train()


def compile_task(model, config, schedule, loss, epsilon=1e-8, **metrics):
    """Compiles `model` with AdamW on `schedule` and the run's settings.

    Args:
        model: `keras.Model`. Built (its biases and normalisation
            variables are exempt from weight decay).
        config: `TrainingConfig`. Its `weight_decay`, `clipnorm` and
            `jit_compile`.
        schedule: float or `LearningRateSchedule`.
        loss: the loss.
        epsilon: float. AdamW's epsilon. Defaults to `1e-8`.
        **metrics: `metrics=` and/or `weighted_metrics=` of `compile`.
    """
    model.compile(
        optimizer=adamw(
            schedule,
            weight_decay=config.weight_decay,
            global_clipnorm=config.clipnorm,
            epsilon=epsilon,
            model=model,
        ),
        loss=loss,
        jit_compile=config.keras_jit_compile(),
        **metrics,
    )


def fit_task(
    model,
    train_data,
    validation_data,
    config,
    distribution,
    steps_per_epoch,
    callbacks=None,
    **options,
):
    """`keras_gmlp.training.setup.fit` with the run's settings.

    Args:
        model: a compiled `keras.Model`.
        train_data: `tf.data.Dataset` of batches.
        validation_data: `tf.data.Dataset` of batches, or `None`.
        config: `TrainingConfig`. Its `epochs`, `output_dir`, `tensorboard`
            and `verbose`.
        distribution: `keras_gmlp.training.Distribution`.
        steps_per_epoch: int or `None`.
        callbacks: list or `None`. Extra callbacks.
        **options: `monitor`, `mode`, `endless_stream` of `fit`.

    Returns:
        `(history, wall_time)`, as `fit` returns them.
    """
    return fit(
        model,
        train_data,
        validation_data,
        epochs=config.epochs,
        output_dir=config.output_dir,
        distribution=distribution,
        steps_per_epoch=steps_per_epoch,
        tensorboard=config.tensorboard,
        verbose=config.verbose,
        callbacks=callbacks,
        **options,
    )
