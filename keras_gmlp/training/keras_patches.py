"""Patches of Keras bugs, per Keras version.

Two bugs of Keras 3.15 stop `model.fit` under TensorFlow's
`MultiWorkerMirroredStrategy`, and one stops chief-only saving under
multi-process JAX; `keras_gmlp.training.distribution` installs the patches
when it sets up such a strategy. A fourth makes every `.keras` save build
throwaway reference layers; `keras_gmlp.training.training_callbacks`
installs its patch, as the recipes save a checkpoint at every epoch. They
are installed only on the Keras versions in `PATCHED_KERAS_VERSIONS` (and
only when the patched Keras functions exist): another version is left as it
is, so a Keras release that fixes the bugs is never patched over. Found to
be needed on Keras 3.15.1 (tensorflow/tensorflow#72388 for the reduction);
the range starts at Keras 3.10, the oldest this package supports. When a
newer Keras still fails as described below, widen the range.
"""

import keras

# Inclusive (major, minor) range of the Keras versions that get the patches.
PATCHED_KERAS_VERSIONS = ((3, 10), (3, 15))


def keras_version():
    """The installed Keras version as a tuple of ints, e.g. `(3, 15, 1)`."""
    parts = []
    for part in keras.version().split(".")[:3]:
        digits = "".join(c for c in part if c.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def needs_patches(version=None):
    """Whether a Keras version is in `PATCHED_KERAS_VERSIONS`.

    Args:
        version: tuple of int or `None`. Defaults to the installed one.
    """
    version = keras_version() if version is None else tuple(version)
    first, last = PATCHED_KERAS_VERSIONS
    return first <= version[:2] <= last


_WORKAROUNDS_INSTALLED = False


def install_multi_worker_workarounds():
    """Patches two Keras 3.15 bugs of `model.fit` under multi-worker TF.

    1. `TensorFlowTrainer._maybe_symbolic_build` calls `strategy.reduce` on
       a `PerReplica` data batch to build the model symbolically, which
       `MultiWorkerMirroredStrategy` rejects ("unsupported type
       PerReplica"). The patch builds from the first local replica's batch,
       which has the same structure and shapes.
    2. `reduce_per_replica` reduces the scalar metric results of
       multi-worker training with `axis=0` ("Invalid reduction dimension 0",
       tensorflow/tensorflow#72388). The patch reduces them with
       `axis=None`, a plain mean over replicas.

    Both patches act only under a multi-worker collective strategy and
    leave every other path unchanged. Installing twice is a no-op.

    Returns:
        bool. Whether the patches are installed (`False` on a Keras version
        outside `PATCHED_KERAS_VERSIONS`, or one without these functions).
    """
    global _WORKAROUNDS_INSTALLED
    if _WORKAROUNDS_INSTALLED:
        return True
    if not needs_patches():
        return False
    import tensorflow as tf
    from keras.src.backend.tensorflow import trainer as tf_trainer

    if not hasattr(
        tf_trainer.TensorFlowTrainer, "_maybe_symbolic_build"
    ) or not hasattr(tf_trainer, "reduce_per_replica"):
        return False

    original_build = tf_trainer.TensorFlowTrainer._maybe_symbolic_build
    original_reduce = tf_trainer.reduce_per_replica

    def maybe_symbolic_build(self, iterator=None, data_batch=None):
        strategy = self._distribute_strategy
        if iterator is None or not _is_multi_worker(strategy):
            return original_build(self, iterator, data_batch)
        for _, _, batches in iterator:
            batch = next(batches)
            data_batch = tf.nest.map_structure(
                lambda value: (
                    strategy.experimental_local_results(value)[0]
                    if isinstance(value, tf.distribute.DistributedValues)
                    else value
                ),
                batch,
            )
            break
        with strategy.scope():
            self._symbolic_build(data_batch=data_batch)

    def reduce_per_replica(values, strategy, reduction):
        if not _is_multi_worker(strategy) or reduction not in ("auto", "mean"):
            return original_reduce(values, strategy, reduction)
        return tf.nest.map_structure(
            lambda value: strategy.reduce("MEAN", value, axis=None), values
        )

    tf_trainer.TensorFlowTrainer._maybe_symbolic_build = maybe_symbolic_build
    tf_trainer.reduce_per_replica = reduce_per_replica
    _WORKAROUNDS_INSTALLED = True
    return True


def _is_multi_worker(strategy):
    import tensorflow as tf

    return (
        isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
        and strategy.extended._in_multi_worker_mode()
    )


_JAX_WORKAROUNDS_INSTALLED = False


def _saving_lib_to_patch():
    """Keras' `saving_lib` where its `get_attr_skipset` is to be patched
    (a Keras version that needs the patches, with that function), else
    `None`."""
    if not needs_patches():
        return None
    from keras.src.saving import saving_lib

    return saving_lib if hasattr(saving_lib, "get_attr_skipset") else None


def install_jax_multi_process_workarounds():
    """Patches a Keras 3.15 bug of chief-only saving under multi-process JAX.

    To list the attributes it skips, Keras' saving builds reference objects
    once per type (`saving_lib.get_attr_skipset`), among them an
    `Optimizer(1.0)` with two variables. Under a multi-process
    `DataParallel` those variables are laid out on every process's devices,
    and JAX's `device_put` onto devices of other processes is a collective
    (it checks that every process passes the same value). Only the chief
    saves `best.keras`, `last.keras` and `model.keras`, so the chief waits
    in a collective that the other processes never join, or meets one of
    theirs (AssertionError "passed to device_put is not the same on each
    process"). The patch builds the reference objects with no distribution
    set: local variables, no collective. Saving itself only reads the
    replicated weights, which every process holds whole.

    Installing twice is a no-op.

    Returns:
        bool. Whether the patch is installed (`False` on a Keras version
        outside `PATCHED_KERAS_VERSIONS`, or one without this function).
    """
    global _JAX_WORKAROUNDS_INSTALLED
    if _JAX_WORKAROUNDS_INSTALLED:
        return True
    saving_lib = _saving_lib_to_patch()
    if saving_lib is None:
        return False
    from keras.src.distribution import distribution_lib

    original_skipset = saving_lib.get_attr_skipset

    def get_attr_skipset(obj_type):
        current = distribution_lib.distribution()
        if current is None:
            return original_skipset(obj_type)
        distribution_lib.set_distribution(None)
        try:
            return original_skipset(obj_type)
        finally:
            distribution_lib.set_distribution(current)

    saving_lib.get_attr_skipset = get_attr_skipset
    _JAX_WORKAROUNDS_INSTALLED = True
    return True


_SKIPSET_CACHE_INSTALLED = False
# Saving's skipsets by object type, once built (`install_saving_skipset_
# cache`).
_SAVING_SKIPSETS = {}


def install_saving_skipset_cache():
    """Patches a Keras 3.15 bug that rebuilds saving's skipsets per object.

    To list the attributes it does not walk, Keras' `.keras` saving builds a
    reference object of each type it meets (`saving_lib.get_attr_skipset`:
    a `Layer()`, an `Optimizer(1.0)`, a `Metric()`...) and means to keep
    the set in Keras' global state, but it writes the set under
    `saving_attr_skipset_<type>` and reads `saving_attr_skiplist_<type>`:
    the set is built again for every layer, metric and loss walked, about
    40 reference objects per save of the quick-start's model. The patch
    keeps each type's set once built (the types' attributes do not change
    in a process), which makes a save of the quick-start's model about
    1.35x faster. The sets are the ones Keras builds, so what is saved is
    unchanged.

    Installing twice is a no-op.

    Returns:
        bool. Whether the patch is installed (`False` on a Keras version
        outside `PATCHED_KERAS_VERSIONS`, or one without this function).
    """
    global _SKIPSET_CACHE_INSTALLED
    if _SKIPSET_CACHE_INSTALLED:
        return True
    saving_lib = _saving_lib_to_patch()
    if saving_lib is None:
        return False

    # Either order with the multi-process JAX patch works: that one only
    # sets the distribution aside around the call it wraps.
    unpatched = saving_lib.get_attr_skipset

    def get_attr_skipset(obj_type):
        if obj_type not in _SAVING_SKIPSETS:
            _SAVING_SKIPSETS[obj_type] = unpatched(obj_type)
        return _SAVING_SKIPSETS[obj_type]

    saving_lib.get_attr_skipset = get_attr_skipset
    _SKIPSET_CACHE_INSTALLED = True
    return True
