"""TensorFlow's op threads for the blocks' parallel chains."""

import os
import warnings

import keras

from keras_gmlp.kernels.batch_chains import CHAINS
from keras_gmlp.kernels.batch_chains import usable_cores

# Set to "0", it turns `share_cores_between_chains` off.
ENV_VARIABLE = "KERAS_GMLP_SHARE_CORES"


def share_cores_between_chains(cpu_count=None):
    """Gives each of the blocks' chains its share of the cores:
    TensorFlow's intra-op threads set to `cores // CHAINS`.

    Under TensorFlow the gMLP blocks run on the halves of the batch as two
    chains of ops, side by side on the executor's inter-op threads
    (`keras_gmlp.kernels.batch_chains`). Each op spreads itself over the
    intra-op threads, by default one per core, so two products running at
    once would ask for twice the cores there are. An op that runs alone
    (a batch of one) gets only its share of the cores.

    The `keras-gmlp` command and the recipes call it before training. It
    does nothing under JAX and torch, where TensorFlow sees a GPU, where
    the intra-op threads are already set (`TF_NUM_INTRAOP_THREADS` or
    `tf.config.threading`), or with `KERAS_GMLP_SHARE_CORES=0` in the
    environment. Call it before
    TensorFlow's first op: TensorFlow fixes its thread pools when its
    runtime starts (later, it warns and does nothing).

    Args:
        cpu_count: int or `None`. Cores to share. Defaults to the cores
            this process may run on.

    Returns:
        int or `None`. The intra-op threads set, or `None` if nothing was
        changed.

    Example:

    ```python
    from keras_gmlp.kernels import share_cores_between_chains

    share_cores_between_chains()  # first: before TensorFlow's first op
    ```
    """
    if cpu_count is not None and cpu_count < 1:
        raise ValueError(
            f"Received cpu_count={cpu_count}; expected a positive integer."
        )
    if keras.config.backend() != "tensorflow":
        return None
    if os.environ.get(ENV_VARIABLE) == "0":
        return None
    if os.environ.get("TF_NUM_INTRAOP_THREADS"):
        return None
    import tensorflow as tf

    if tf.config.threading.get_intra_op_parallelism_threads():
        return None
    if tf.config.list_physical_devices("GPU"):
        return None  # the products run there; measured on CPUs only
    if cpu_count is None:
        cpu_count = usable_cores()
    threads = max(1, cpu_count // CHAINS)
    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
    except RuntimeError:
        warnings.warn(
            "share_cores_between_chains() was called after TensorFlow "
            "started its runtime, so its ops keep their threads and "
            "nothing was changed; call it before TensorFlow's first op "
            "(before building a model).",
            stacklevel=2,
        )
        return None
    return threads
