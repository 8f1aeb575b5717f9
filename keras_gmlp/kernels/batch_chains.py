"""Kernels of the `"batch_chains"` operation: under TensorFlow and JAX, a
gMLP block's kernel on the two halves of the batch as two independent
chains of ops.

TensorFlow's executor runs the ops of a graph that are ready side by side
on its inter-op threads. A block is a chain of ops, each waiting for the
last, and its XLA functions use the intra-op threads only in part. On
each half of the batch the block is an independent chain, which the
executor runs beside the other's, each op on its share of the cores
(`keras_gmlp.kernels.share_cores_between_chains`, which the training jobs
set); XLA:CPU (JAX) runs the ready operations of both halves side by
side too, in training. gMLP-Ti/16 training at batch 16 on 2 cores runs
1.30x faster so under TensorFlow and 1.17x under JAX
(`benchmarks/kernels.py`).

In a TensorFlow graph a block's output keeps its halves (`PARTS`), and
the next block takes them instead of splitting the joined batch again, so
the two chains run through the whole stack without waiting for each other
at every block. Where no gradient tape records (`predict`) nothing can ask
for a gradient through the joined output; in training (`fit`) a gradient
with respect to a block's output taken inside the step is `None` for that
reason. Elsewhere (a saliency map under a tape, outside training) the
blocks join and split as usual.
"""

import os

import keras

from keras_gmlp.kernels.xla_functions import xla_functions_enabled

CHAINS = 2

# The attribute of a joined TensorFlow output that holds its halves.
PARTS = "_keras_gmlp_batch_parts"


def usable_cores():
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def chains_fit_the_cores():
    """Whether `CHAINS` of TensorFlow's ops at once use at most the cores:
    its intra-op threads set to a chain's share of them (by default each
    op takes every core, and two chains are then slower than one)."""
    import tensorflow as tf

    threads = tf.config.threading.get_intra_op_parallelism_threads()
    return 0 < threads * CHAINS <= usable_cores()


def runs_batch_chains(inputs):
    """Whether `inputs` run as `CHAINS` chains: under TensorFlow, in a
    graph that XLA does not compile, on a tensor (not symbolic), with the
    cores shared between the chains (`chains_fit_the_cores`)."""
    if keras.config.backend() != "tensorflow" or not xla_functions_enabled():
        return False
    if isinstance(inputs, keras.KerasTensor):
        return False
    import tensorflow as tf
    from tensorflow.python.ops import control_flow_util

    graph = tf.compat.v1.get_default_graph()
    return (
        not tf.executing_eagerly()
        and not control_flow_util.GraphOrParentsInXlaContext(graph)
        and chains_fit_the_cores()
    )


def split_batch(x):
    """`x` cut along its first axis into `CHAINS` parts, as even as its
    (possibly dynamic) size allows; a part may be empty."""
    import tensorflow as tf

    size = tf.shape(x)[0]
    first = size - size // CHAINS * (CHAINS - 1)
    sizes = [first] + [size // CHAINS] * (CHAINS - 1)
    return tf.split(x, tf.stack(sizes), num=CHAINS, axis=0)


def tensorflow_batch_chains(
    block_kernel, block, inputs, padding_mask, training
):
    """`block_kernel(block, inputs, padding_mask, training)` on each half
    of the batch, joined; `NotImplemented` where `runs_batch_chains` is
    not."""
    if not runs_batch_chains(inputs):
        return NotImplemented
    carried = carries_parts(training)
    parts = batch_parts(inputs, carried)
    masks = [None] * CHAINS
    if padding_mask is not None:
        masks = batch_parts(padding_mask, carried=True)
    outputs = [
        block_kernel(block, part, mask, training)
        for part, mask in zip(parts, masks, strict=True)
    ]
    joined = keras.ops.concatenate(outputs, axis=0)
    if carried:
        remember_parts(joined, outputs)
    return joined


def carries_parts(training):
    """Whether the blocks hand their halves on (`PARTS`): in training, or
    where no gradient tape records."""
    from tensorflow.python.eager import record

    return bool(training) or not record.could_possibly_record()


def batch_parts(x, carried):
    """`x`'s `CHAINS` parts: with `carried`, those a block joined into
    `x` or an earlier split of `x` (a mask's, shared by the blocks), else
    `split_batch(x)`."""
    parts = getattr(x, PARTS, None) if carried else None
    if parts is None:
        parts = split_batch(x)
        if carried:
            remember_parts(x, parts)
    return parts


def remember_parts(x, parts):
    """Keeps `parts` on the graph tensor `x` (as Keras keeps a mask)."""
    try:
        setattr(x, PARTS, parts)
    except AttributeError:
        pass


def jax_batch_chains(block_kernel, block, inputs, padding_mask, training):
    """`tensorflow_batch_chains` under JAX, in a training step compiled for
    a CPU (XLA runs the ready operations of both halves side by side):
    `NotImplemented` outside training (gMLP-Ti/16 inference ran 0.86x so),
    outside a trace, or for a batch of one."""
    import jax

    if not training or not isinstance(inputs, jax.core.Tracer):
        return NotImplemented
    if inputs.shape[0] is None or inputs.shape[0] < CHAINS:
        return NotImplemented
    if keras.distribution.distribution() is not None:
        return NotImplemented
    size = inputs.shape[0]
    first = size - size // CHAINS * (CHAINS - 1)
    ends = [first + index * (size // CHAINS) for index in range(CHAINS - 1)]
    parts = keras.ops.split(inputs, ends, axis=0)
    masks = [None] * CHAINS
    if padding_mask is not None:
        masks = keras.ops.split(padding_mask, ends, axis=0)
    outputs = [
        block_kernel(block, part, mask, training)
        for part, mask in zip(parts, masks, strict=True)
    ]
    return keras.ops.concatenate(outputs, axis=0)
