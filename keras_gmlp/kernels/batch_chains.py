"""Running a backbone's blocks on the halves of the batch as two
independent chains of ops: the image and text backbones under TensorFlow,
the text backbone under JAX on a CPU."""

import os

import keras

from keras_gmlp.kernels.xla_functions import tracing_portable_ops
from keras_gmlp.kernels.xla_functions import xla_functions_enabled

CHAINS = 2


def runs_batch_chains(inputs):
    """Whether a backbone runs its blocks on `inputs` as `CHAINS` chains:
    under TensorFlow, in a graph that XLA does not compile, with the XLA
    functions allowed (not an export), on a tensor (not symbolic).

    TensorFlow's executor runs the ops of a graph that are ready side by
    side on its inter-op threads (two on two cores), each op itself on
    its intra-op threads. A gMLP block is a chain of ops, each waiting for
    the last, and the XLA functions among them (the LayerNorms, the GELU,
    the gates) use the intra-op threads only in part. The blocks of each
    half of the batch are an independent chain, which the executor runs
    beside the other's: float32 gMLP-Ti/16 and gMLP-S/16 training at
    batch 32 runs 1.06x faster so (`benchmarks/vision.py`). The masked
    LM's smaller blocks run no faster that way with every op on all the
    cores, so the text backbone runs as chains only where its ops share
    them (`runs_text_chains`).
    """
    if keras.config.backend() != "tensorflow" or not xla_functions_enabled():
        return False
    if isinstance(inputs, keras.KerasTensor):
        return False
    import tensorflow as tf
    from tensorflow.python.ops import control_flow_util

    graph = tf.compat.v1.get_default_graph()
    return not tf.executing_eagerly() and not (
        control_flow_util.GraphOrParentsInXlaContext(graph)
    )


def usable_cores():
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def chains_fit_the_cores():
    """Whether `CHAINS` of TensorFlow's ops at once use at most the cores:
    its intra-op threads set to a chain's share of them, as
    `keras_gmlp.kernels.share_cores_between_chains` sets them (by
    default each op takes every core).

    The text backbone runs as chains only then: two chains with one
    thread per op make `gmlp_tiny` masked-LM training 1.04-1.07x faster
    than one chain on all the cores (`benchmarks/masked_lm_speed.py`),
    while two chains on all the cores are slower.
    """
    import tensorflow as tf

    threads = tf.config.threading.get_intra_op_parallelism_threads()
    return 0 < threads * CHAINS <= usable_cores()


def runs_jax_chains(inputs):
    """Whether a backbone runs its blocks on `inputs` as `CHAINS` chains
    under JAX: traced (a `jax.jit` step) for a CPU, outside
    `reference_only()` (an export) and a `keras.distribution` (which lays
    the batch out over its devices already), at least `CHAINS` rows in
    the batch.

    XLA:CPU runs the ready operations of a compiled step side by side on
    its thread pool. The text backbone's blocks on each half of the batch
    are an independent chain (a block mixes tokens within a sequence,
    never across sequences), so the small operations of one chain run
    beside the other's: `gmlp_tiny` and `amlp_tiny` masked-LM training
    runs 1.04-1.07x faster so (`benchmarks/masked_lm_speed.py`). The
    image backbone's larger operations gain nothing from it, so it keeps
    one chain under JAX.
    """
    if keras.config.backend() != "jax" or tracing_portable_ops():
        return False
    if keras.distribution.distribution() is not None:
        return False
    import jax

    return (
        isinstance(inputs, jax.core.Tracer)
        and jax.default_backend() == "cpu"
        and inputs.shape[0] is not None
        and inputs.shape[0] >= CHAINS
    )


def runs_text_chains(token_ids):
    """Whether the text backbone runs its blocks on `token_ids` as
    `CHAINS` chains: under TensorFlow where `runs_batch_chains` and
    `chains_fit_the_cores`, under JAX where `runs_jax_chains`."""
    if runs_jax_chains(token_ids):
        return True
    return runs_batch_chains(token_ids) and chains_fit_the_cores()


def split_batch(x):
    """`x` cut along its first axis into `CHAINS` parts, as even as its
    (possibly dynamic, under TensorFlow) size allows; a part may be
    empty."""
    if keras.config.backend() != "tensorflow":
        size = x.shape[0]
        first = size - size // CHAINS * (CHAINS - 1)
        ends = [first + index * (size // CHAINS) for index in range(CHAINS)]
        return keras.ops.split(x, ends[:-1], axis=0)
    import tensorflow as tf

    size = tf.shape(x)[0]
    first = size - size // CHAINS * (CHAINS - 1)
    sizes = [first] + [size // CHAINS] * (CHAINS - 1)
    return tf.split(x, tf.stack(sizes), num=CHAINS, axis=0)


def join_batch(parts):
    """The parts of `split_batch` joined back."""
    return keras.ops.concatenate(parts, axis=0)
