import json
import os
import socket
import subprocess
import sys

import keras
import pytest

from keras_gmlp.training.distribution import get_distribution
from tests.backends import xla_flags

SCRIPT = os.path.join(os.path.dirname(__file__), "distributed_fit.py")
BACKEND = keras.config.backend()


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_script(strategy, output, env=None, wait=True):
    env = dict(os.environ, **(env or {}))
    process = subprocess.Popen(
        [sys.executable, SCRIPT, strategy, str(output)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    if not wait:
        return process
    log, _ = process.communicate(timeout=300)
    assert process.returncode == 0, log[-4000:]
    return json.load(open(output))


def test_unknown_strategy_names_the_choices():
    with pytest.raises(ValueError, match="'bogus'.*expected one of"):
        get_distribution("bogus")


def test_none_has_one_replica():
    distribution = get_distribution("none")
    assert distribution.num_replicas == 1
    with distribution.scope():
        pass


@pytest.mark.skipif(BACKEND != "torch", reason="torch only")
@pytest.mark.parametrize("name", ["mirrored", "data_parallel", "tpu"])
def test_torch_states_its_single_device_support(name):
    with pytest.raises(
        ValueError, match="PyTorch backend trains on one device"
    ):
        get_distribution(name)


@pytest.mark.skipif(BACKEND != "jax", reason="jax only")
def test_jax_rejects_tensorflow_strategies():
    with pytest.raises(ValueError, match="'mirrored' is not available"):
        get_distribution("mirrored")


# The recipe's tests run every strategy end to end in CI; these two check
# the helper alone, more closely, on request (-m large).
@pytest.mark.large
@pytest.mark.skipif(BACKEND == "torch", reason="one device on torch")
def test_two_device_data_parallel_matches_one_device(tmp_path):
    strategy = "mirrored" if BACKEND == "tensorflow" else "data_parallel"
    env = {"XLA_FLAGS": xla_flags(cpu_devices=2)}
    two = run_script(strategy, tmp_path / "two.json", env)
    one = run_script("none", tmp_path / "one.json")
    assert two["name"] == strategy and two["num_replicas"] == 2
    assert one["num_replicas"] == 1
    # Same global batches and seed: the same training, up to float sums.
    assert two["loss"] == pytest.approx(one["loss"], rel=1e-4)


@pytest.mark.large
@pytest.mark.skipif(BACKEND != "tensorflow", reason="TF_CONFIG is TF only")
def test_two_workers_on_localhost_train_identically(tmp_path):
    ports = [free_port(), free_port()]
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    processes = []
    for index in range(2):
        config = {
            "cluster": cluster,
            "task": {"type": "worker", "index": index},
        }
        processes.append(
            run_script(
                "auto",
                tmp_path / f"worker{index}.json",
                {"TF_CONFIG": json.dumps(config)},
                wait=False,
            )
        )
    for process in processes:
        log, _ = process.communicate(timeout=300)
        assert process.returncode == 0, log[-4000:]
    results = [json.load(open(tmp_path / f"worker{i}.json")) for i in range(2)]
    for result in results:
        assert result["name"] == "multi_worker"
        assert result["num_replicas"] == 2
    assert results[0]["loss"] == pytest.approx(results[1]["loss"])
    assert len(results[0]["loss"]) == 2


@pytest.mark.skipif(BACKEND != "jax", reason="jax only")
def test_jax_fit_feeds_each_process_its_part_of_every_batch():
    # What the recipes rely on across JAX processes: model.fit's tf.data
    # adapter gives process i the i-th contiguous part of every global
    # batch, so every process passes the same global batches.
    import numpy as np
    import tensorflow as tf
    from keras.src.trainers.data_adapters import tf_dataset_adapter

    dataset = tf.data.Dataset.range(24).batch(6, drop_remainder=True)
    parts = []
    for index in range(2):
        distribution = keras.distribution.DataParallel(
            devices=["cpu:0", "cpu:1"]
        )
        distribution._num_processes = 2
        distribution._process_id = index
        distribution._is_multi_process = True
        adapter = tf_dataset_adapter.TFDatasetAdapter(
            dataset, distribution=distribution
        )
        parts.append(list(adapter.get_numpy_iterator()))
    assert len(parts[0]) == len(parts[1]) == 4
    for batch, first, second in zip(dataset, *parts, strict=True):
        np.testing.assert_array_equal(
            np.concatenate([first, second]), batch.numpy()
        )


@pytest.mark.large
@pytest.mark.skipif(BACKEND != "jax", reason="KERAS_DISTRIBUTION_* is JAX")
def test_two_jax_processes_match_two_devices(tmp_path):
    env = {"KERAS_DISTRIBUTION_JOB_ADDRESSES": f"127.0.0.1:{free_port()}"}
    env["KERAS_DISTRIBUTION_NUM_PROCESSES"] = "2"
    processes = [
        run_script(
            "auto",
            tmp_path / f"process{index}.json",
            dict(env, KERAS_DISTRIBUTION_PROCESS_ID=str(index)),
            wait=False,
        )
        for index in range(2)
    ]
    for process in processes:
        log, _ = process.communicate(timeout=300)
        assert process.returncode == 0, log[-4000:]
    env = {"XLA_FLAGS": xla_flags(cpu_devices=2)}
    two = run_script("data_parallel", tmp_path / "two.json", env)
    for index in range(2):
        result = json.load(open(tmp_path / f"process{index}.json"))
        assert result["name"] == "data_parallel"
        assert result["num_replicas"] == 2
        # Each process fed its half of every global batch: the training
        # of one process on two devices, to the last bit.
        assert result["loss"] == two["loss"]


@pytest.mark.skipif(BACKEND != "jax", reason="jax only")
def test_jax_none_across_processes_is_an_error(monkeypatch):
    from keras_gmlp.training import distribution

    monkeypatch.setattr(distribution, "_initialize_jax_processes", lambda: 2)
    with pytest.raises(ValueError, match="'none' trains on one device"):
        get_distribution("none")
