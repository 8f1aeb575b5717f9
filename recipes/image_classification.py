"""Trains a gMLP image classifier: tf.data in, results, model and plots out.

The same as `keras-gmlp train-image-classifier` (`keras_gmlp.workflows.
image_classification`); `--help` lists every flag.

Quick start (offline, about a minute on two CPU cores, >= 97 % held-out):

    python recipes/image_classification.py --dataset digits \
        --output-dir runs/digits

CIFAR-10 with the paper's recipe (tfds, or the python/binary batches in
--data-dir), and ImageNet on two GPUs:

    python recipes/image_classification.py --dataset cifar10 \
        --data-dir ~/data/cifar --preset gmlp_s4_32 --output-dir runs/c10
    python recipes/image_classification.py --dataset imagenet2012 \
        --data-dir ~/data/imagenet --preset gmlp_s16_224 --strategy auto

Several processes (hosts) train together through `TF_CONFIG` (TensorFlow)
or `KERAS_DISTRIBUTION_JOB_ADDRESSES`, `KERAS_DISTRIBUTION_NUM_PROCESSES`
and `KERAS_DISTRIBUTION_PROCESS_ID` (JAX): every process runs the same
command; see `keras_gmlp/training/distribution.py`.

Started again with the same command after an interruption (even
`kill -9`), a run continues from its last completed epoch.

results.json records, per block, how local the learned spatial weights are
(`keras_gmlp.plots.spatial_locality`: below 1, each token's filter weighs
nearby patches more; about 1, no preference).

Writes to --output-dir: results.json, run_config.json, history.json,
model.keras, preset/ (GMLPImageClassifier.from_preset; raw images in),
best.keras, last.keras, saved_model/ (uint8 images -> probabilities),
curves.png, spatial_filters.png, tensorboard/.
"""

import keras_gmlp


def main(argv=None, callbacks=None):
    """Runs the recipe; returns the results written to results.json.

    Args:
        argv: list of str or `None`. Command-line arguments. Defaults to
            `sys.argv[1:]`.
        callbacks: list of `keras.callbacks.Callback` or `None`. Extra
            callbacks for `model.fit`.
    """
    # Imported when run, after `set_backend_environment()`: they load
    # the backend.
    from keras_gmlp.workflows import image_classification

    config = image_classification.config_from_argv(argv)
    return image_classification.run(config, callbacks=callbacks)


if __name__ == "__main__":
    keras_gmlp.set_backend_environment()  # first: before the backend loads
    keras_gmlp.kernels.configure_training_process()  # memory, XLA, threads
    main()
