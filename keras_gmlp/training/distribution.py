"""One place that decides how a recipe distributes training per backend.

| `--strategy`   | TensorFlow backend                     | JAX backend        |
|----------------|----------------------------------------|--------------------|
| `auto`         | `multi_worker` if `TF_CONFIG` names    | `data_parallel`    |
|                | more than one worker, else `mirrored`  | with more than one |
|                | with more than one device, else `none` | device, else none  |
| `none`         | default strategy, one device           | one device         |
| `mirrored`     | `tf.distribute.MirroredStrategy`       | -                  |
| `multi_worker` | `MultiWorkerMirroredStrategy`          | -                  |
|                | (cluster from `TF_CONFIG`)             |                    |
| `tpu`          | `tf.distribute.TPUStrategy`            | -                  |
| `data_parallel`| -                                      | `DataParallel`     |

JAX runs multi-process when `KERAS_DISTRIBUTION_JOB_ADDRESSES`,
`KERAS_DISTRIBUTION_NUM_PROCESSES` and `KERAS_DISTRIBUTION_PROCESS_ID` are
set (`keras.distribution.initialize`). The PyTorch backend trains on one
device: Keras 3 `model.fit` has no torch data-parallel path, so `auto` and
`none` run on one device and every other strategy is an error.
"""

import contextlib
import json
import os

import keras

STRATEGIES = (
    "auto",
    "none",
    "mirrored",
    "multi_worker",
    "tpu",
    "data_parallel",
)
BACKEND_STRATEGIES = {
    "tensorflow": ("auto", "none", "mirrored", "multi_worker", "tpu"),
    "jax": ("auto", "none", "data_parallel"),
    "torch": ("auto", "none"),
}


class Distribution:
    """The training set-up chosen by `get_distribution`.

    Args:
        name: str. The resolved strategy name (never `"auto"`).
        num_replicas: int. Number of model replicas training in sync.
        strategy: `tf.distribute.Strategy` or `None`. The TensorFlow
            strategy, for the TensorFlow backend.
        distribution: `keras.distribution.Distribution` or `None`. The
            Keras distribution, for the JAX backend.
        is_chief: bool. Whether this process writes the run's outputs.
        worker_index: int. Index of this process among the workers.

    Example:

    >>> distribution = get_distribution("auto")
    >>> with distribution.scope():
    ...     model = build_and_compile()
    """

    def __init__(
        self,
        name,
        num_replicas=1,
        strategy=None,
        distribution=None,
        is_chief=True,
        worker_index=0,
    ):
        self.name = name
        self.num_replicas = num_replicas
        self.strategy = strategy
        self.distribution = distribution
        self.is_chief = is_chief
        self.worker_index = worker_index

    def scope(self):
        """A context manager to build and compile the model in."""
        if self.strategy is not None:
            return self.strategy.scope()
        if self.distribution is not None:
            return self.distribution.scope()
        return contextlib.nullcontext()

    def prepare_dataset(self, dataset):
        """Sets the dataset options the strategy needs.

        Multi-worker training shards the batches by data (every worker
        reads the same files and keeps its share of the elements).

        Args:
            dataset: `tf.data.Dataset`. A batched dataset of global batches.

        Returns:
            The dataset with its options set.
        """
        if self.name != "multi_worker":
            return dataset
        import tensorflow as tf

        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = (
            tf.data.experimental.AutoShardPolicy.DATA
        )
        return dataset.with_options(options)

    def describe(self):
        """A JSON-serialisable summary for `results.json`."""
        return {
            "strategy": self.name,
            "num_replicas": self.num_replicas,
            "backend": keras.config.backend(),
            "worker_index": self.worker_index,
        }

    def __repr__(self):
        return (
            f"Distribution(name={self.name!r}, "
            f"num_replicas={self.num_replicas})"
        )


def get_distribution(name="auto", devices=None):
    """Returns the `Distribution` for a `--strategy` name and the backend.

    Args:
        name: str. One of `STRATEGIES`. Defaults to `"auto"`.
        devices: list of str. Devices for `mirrored` (TensorFlow device
            names such as `"/cpu:0"`) or `data_parallel` (Keras device
            names such as `"cpu:0"`). Defaults to all local devices.

    Returns:
        A `Distribution`.

    Raises:
        ValueError: for an unknown name, or a strategy that the current
            backend does not support.
    """
    backend = keras.config.backend()
    if name not in STRATEGIES:
        raise ValueError(
            f"Unknown strategy {name!r}; expected one of {list(STRATEGIES)}."
        )
    supported = BACKEND_STRATEGIES.get(backend, ("auto", "none"))
    if name not in supported:
        detail = ""
        if backend == "torch":
            detail = (
                " The PyTorch backend trains on one device: Keras 3 "
                "model.fit has no torch data-parallel strategy."
            )
        raise ValueError(
            f"Strategy {name!r} is not available on the {backend} backend; "
            f"expected one of {list(supported)}.{detail}"
        )
    if backend == "tensorflow":
        return _tensorflow_distribution(name, devices)
    if backend == "jax":
        return _jax_distribution(name, devices)
    return Distribution("none")


def _tf_config_workers():
    config = os.environ.get("TF_CONFIG")
    if not config:
        return 0, 0
    config = json.loads(config)
    workers = config.get("cluster", {}).get("worker", [])
    task = config.get("task", {})
    index = task.get("index", 0) if task.get("type") == "worker" else 0
    return len(workers), index


def _tensorflow_distribution(name, devices):
    import tensorflow as tf

    num_workers, worker_index = _tf_config_workers()
    if name == "auto":
        # The multi-worker strategy must be created before TensorFlow
        # initialises its devices, so TF_CONFIG is looked at first.
        if num_workers > 1:
            name = "multi_worker"
        elif len(devices or _local_tf_devices()) > 1:
            name = "mirrored"
        else:
            name = "none"
    if name == "none":
        return Distribution("none")
    if name == "mirrored":
        strategy = tf.distribute.MirroredStrategy(
            devices or _local_tf_devices()
        )
        return Distribution(
            "mirrored", strategy.num_replicas_in_sync, strategy=strategy
        )
    if name == "multi_worker":
        if num_workers == 0:
            raise ValueError(
                "Strategy 'multi_worker' needs the cluster in the TF_CONFIG "
                'environment variable, e.g. TF_CONFIG=\'{"cluster": '
                '{"worker": ["host1:port", "host2:port"]}, "task": '
                '{"type": "worker", "index": 0}}\'.'
            )
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        install_multi_worker_workarounds()
        return Distribution(
            "multi_worker",
            strategy.num_replicas_in_sync,
            strategy=strategy,
            is_chief=worker_index == 0,
            worker_index=worker_index,
        )
    # name == "tpu"
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
        tpu=os.environ.get("TPU_NAME", "")
    )
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    strategy = tf.distribute.TPUStrategy(resolver)
    return Distribution("tpu", strategy.num_replicas_in_sync, strategy=strategy)


def _local_tf_devices():
    import tensorflow as tf

    gpus = tf.config.list_logical_devices("GPU")
    if gpus:
        return [device.name for device in gpus]
    return [device.name for device in tf.config.list_logical_devices("CPU")]


def _jax_distribution(name, devices):
    if os.environ.get("KERAS_DISTRIBUTION_NUM_PROCESSES"):
        keras.distribution.initialize()
    devices = devices or keras.distribution.list_devices()
    if name == "auto":
        name = "data_parallel" if len(devices) > 1 else "none"
    if name == "none":
        return Distribution("none")
    import jax

    distribution = keras.distribution.DataParallel(devices=devices)
    keras.distribution.set_distribution(distribution)
    return Distribution(
        "data_parallel",
        len(devices),
        distribution=distribution,
        is_chief=jax.process_index() == 0,
        worker_index=jax.process_index(),
    )


def split_cpu_for_tests(num_devices=2):
    """Splits the host CPU into several devices, for tests of strategies.

    TensorFlow: logical CPU devices (call before TensorFlow runs anything).
    JAX: the device count comes from `XLA_FLAGS=
    --xla_force_host_platform_device_count=N`, which must be set before JAX
    is imported; this function checks that it was.

    Args:
        num_devices: int. Number of devices. Defaults to `2`.

    Returns:
        The list of device names for `get_distribution(devices=...)`.
    """
    backend = keras.config.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        cpu = tf.config.list_physical_devices("CPU")[0]
        configured = tf.config.get_logical_device_configuration(cpu) or []
        if len(configured) < num_devices:
            tf.config.set_logical_device_configuration(
                cpu, [tf.config.LogicalDeviceConfiguration()] * num_devices
            )
        return [f"/cpu:{i}" for i in range(num_devices)]
    if backend == "jax":
        devices = keras.distribution.list_devices("cpu")
        if len(devices) < num_devices:
            raise RuntimeError(
                f"JAX sees {len(devices)} CPU device(s), expected "
                f"{num_devices}: set XLA_FLAGS="
                f"--xla_force_host_platform_device_count={num_devices} "
                "before JAX is imported."
            )
        return devices[:num_devices]
    raise ValueError(
        f"The {backend} backend trains on one device; nothing to split."
    )


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
    """
    global _WORKAROUNDS_INSTALLED
    if _WORKAROUNDS_INSTALLED:
        return
    import tensorflow as tf
    from keras.src.backend.tensorflow import trainer as tf_trainer

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


def _is_multi_worker(strategy):
    import tensorflow as tf

    return (
        isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
        and strategy.extended._in_multi_worker_mode()
    )
