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

JAX runs multi-process when `KERAS_DISTRIBUTION_JOB_ADDRESSES` (the
coordinator's `host:port`, or every process's, comma-separated, the first
being the coordinator), `KERAS_DISTRIBUTION_NUM_PROCESSES` and
`KERAS_DISTRIBUTION_PROCESS_ID` are set: `keras.distribution.initialize`
joins the processes (on CPU, JAX's cross-process collectives use gloo by
default; nothing to set) and `auto` or `data_parallel` build one
`DataParallel` mesh over the devices of every process; `none` is then an
error. Every process runs the same command and builds the same pipeline of
global batches (same seed); Keras' `model.fit` feeds each process its
contiguous part of every global batch, so the global batch and the learning
rate scale with the devices of all processes, and the training equals a
single process's on as many devices. Process 0 is the chief: it writes the
checkpoints, `model.keras` and `results.json`; the others keep their backup
and history in `output_dir/workers/<index>/`. Two processes on one machine:

    KERAS_BACKEND=jax KERAS_DISTRIBUTION_JOB_ADDRESSES=127.0.0.1:1234 \
    KERAS_DISTRIBUTION_NUM_PROCESSES=2 KERAS_DISTRIBUTION_PROCESS_ID=0 \
        python recipes/image_classification.py --output-dir runs/mp &
    # the same with KERAS_DISTRIBUTION_PROCESS_ID=1

`keras_gmlp.training.keras_patches` patches the Keras 3.15 bug that
otherwise stops such a run at its first checkpoint.

The PyTorch backend trains on one device: Keras 3 `model.fit` has no torch
data-parallel path, so `auto` and `none` run on one device and every other
strategy is an error.
"""

import contextlib
import json
import os

import keras

from keras_gmlp.training.keras_patches import (
    install_jax_multi_process_workarounds,
)
from keras_gmlp.training.keras_patches import install_multi_worker_workarounds
from keras_gmlp.training.run_config import STRATEGIES

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
        num_processes: int. Number of processes (workers) training
            together.

    Example:

    >>> from keras_gmlp.training.distribution import get_distribution
    >>> distribution = get_distribution("auto")
    >>> with distribution.scope():
    ...     model = keras_gmlp.models.image_classifier(
    ...         num_classes=2, image_size=8, patch_size=4, num_layers=1,
    ...         hidden_dim=4, ffn_dim=8)
    ...     model.compile(optimizer="adam", loss="mse")
    >>> distribution.num_replicas >= 1
    True
    """

    def __init__(
        self,
        name,
        num_replicas=1,
        strategy=None,
        distribution=None,
        is_chief=True,
        worker_index=0,
        num_processes=1,
    ):
        self.name = name
        self.num_replicas = num_replicas
        self.strategy = strategy
        self.distribution = distribution
        self.is_chief = is_chief
        self.worker_index = worker_index
        self.num_processes = num_processes

    def scope(self):
        """A context manager to build and compile the model in."""
        if self.strategy is not None:
            return self.strategy.scope()
        if self.distribution is not None:
            return self.distribution.scope()
        return contextlib.nullcontext()

    def prepare_dataset(self, dataset):
        """Sets the dataset options the strategy needs.

        TensorFlow multi-worker training shards the batches by data (every
        worker reads the same files and keeps its share of the elements).
        JAX `data_parallel` returns the dataset unchanged, also across
        processes: Keras' `model.fit` gives each process its part of every
        global batch, so every process passes the same global batches.

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
            "num_processes": self.num_processes,
            "backend": keras.config.backend(),
            "worker_index": self.worker_index,
        }

    def __repr__(self):
        processes = ""
        if self.num_processes > 1:
            processes = f", num_processes={self.num_processes}"
        return (
            f"Distribution(name={self.name!r}, "
            f"num_replicas={self.num_replicas}{processes})"
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
            num_processes=num_workers,
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
    num_processes = _initialize_jax_processes()
    devices = devices or keras.distribution.list_devices()
    if name == "auto":
        name = "data_parallel" if len(devices) > 1 else "none"
    if name == "none":
        if num_processes > 1:
            raise ValueError(
                f"Strategy 'none' trains on one device, but "
                f"KERAS_DISTRIBUTION_NUM_PROCESSES={num_processes} asks for "
                "several processes; use 'data_parallel' (or 'auto'), or "
                "unset the KERAS_DISTRIBUTION_* variables."
            )
        return Distribution("none")
    import jax

    # In a multi-process run, Keras' `model.fit` hands a tf.data.Dataset to
    # `DataParallel.distribute_dataset` (auto_shard_dataset=True): each
    # global batch is re-batched into one part per process and every
    # process keeps its own part (`rebatch(global // processes)` then
    # `shard(processes, process_index)`); `jax.make_array_from_process_
    # local_data` joins the parts into the global batch on the mesh. So
    # every process builds the same pipeline of global batches (same seed)
    # and must not shard it itself.
    distribution = keras.distribution.DataParallel(
        devices=devices, auto_shard_dataset=True
    )
    keras.distribution.set_distribution(distribution)
    return Distribution(
        "data_parallel",
        len(devices),
        distribution=distribution,
        is_chief=jax.process_index() == 0,
        worker_index=jax.process_index(),
        num_processes=num_processes,
    )


def _initialize_jax_processes():
    """Joins the JAX processes named by `KERAS_DISTRIBUTION_*`, once.

    Returns:
        The number of processes (1 without the variables).
    """
    if not os.environ.get("KERAS_DISTRIBUTION_NUM_PROCESSES"):
        return 1
    import jax

    if not jax.distributed.is_initialized():
        # JAX's CPU client uses gloo for cross-process collectives by
        # default (jax_cpu_collectives_implementation), nothing to set.
        keras.distribution.initialize()
    install_jax_multi_process_workarounds()
    return jax.process_count()


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
        import jax

        # Joining other processes must come before JAX lists its devices.
        _initialize_jax_processes()
        local = len(jax.local_devices(backend="cpu"))
        if local < num_devices:
            raise RuntimeError(
                f"JAX sees {local} CPU device(s), expected "
                f"{num_devices}: set XLA_FLAGS="
                f"--xla_force_host_platform_device_count={num_devices} "
                "before JAX is imported."
            )
        # The first `num_devices` of every process's devices.
        taken = {}
        devices = []
        for device in jax.devices("cpu"):
            index = device.process_index
            if taken.get(index, 0) < num_devices:
                taken[index] = taken.get(index, 0) + 1
                devices.append(f"{device.platform}:{device.id}")
        return devices
    raise ValueError(
        f"The {backend} backend trains on one device; nothing to split."
    )
