"""`keras_gmlp.kernels.share_cores_between_chains`: TensorFlow's intra-op
threads for the image backbone's two chains."""

import subprocess
import sys

import keras
import pytest

from keras_gmlp.kernels import threads
from keras_gmlp.kernels.batch_chains import CHAINS
from keras_gmlp.kernels.threads import share_cores_between_chains


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_does_nothing_outside_tensorflow(backend, monkeypatch):
    monkeypatch.delenv(threads.ENV_VARIABLE, raising=False)
    monkeypatch.setattr(keras.config, "backend", lambda: backend)
    assert share_cores_between_chains(cpu_count=4) is None


@pytest.mark.parametrize(
    "variable", [threads.ENV_VARIABLE, "TF_NUM_INTRAOP_THREADS"]
)
def test_leaves_threads_the_environment_sets(variable, monkeypatch):
    # Opted out, or the threads set by TensorFlow's own variable: the
    # function returns before it reads or sets TensorFlow's (in this test
    # process, whose threads must not change).
    monkeypatch.delenv(threads.ENV_VARIABLE, raising=False)
    monkeypatch.setenv(
        variable, "0" if variable == threads.ENV_VARIABLE else "2"
    )
    monkeypatch.setattr(keras.config, "backend", lambda: "tensorflow")
    assert share_cores_between_chains(cpu_count=4) is None


@pytest.mark.parametrize("cpu_count", [0, -2])
def test_rejects_a_cpu_count_below_one(cpu_count):
    with pytest.raises(ValueError, match=f"cpu_count={cpu_count}"):
        share_cores_between_chains(cpu_count=cpu_count)


PROBE = """
import os, sys, warnings
os.environ["KERAS_BACKEND"] = "tensorflow"
import tensorflow as tf
from keras_gmlp.kernels import share_cores_between_chains

cpu_count = int(sys.argv[1])
if "gpu" in sys.argv:  # as TensorFlow lists a machine's GPU
    listed = tf.config.list_physical_devices
    tf.config.list_physical_devices = lambda kind=None: (
        ["/physical_device:GPU:0"] if kind == "GPU" else listed(kind)
    )
if "late" in sys.argv:
    tf.ones((2,)) + 1.0  # TensorFlow's runtime started
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    returned = share_cores_between_chains(cpu_count=cpu_count)
    again = share_cores_between_chains(cpu_count=cpu_count)
x = tf.random.normal((64, 64))
tf.matmul(x, x)
print(returned, again, tf.config.threading.get_intra_op_parallelism_threads(),
      len([w for w in caught if "after TensorFlow started" in str(w.message)]))
"""


def probe(*arguments):
    import os

    env = dict(os.environ)
    env.pop(threads.ENV_VARIABLE, None)
    env.pop("TF_NUM_INTRAOP_THREADS", None)
    result = subprocess.run(
        [sys.executable, "-c", PROBE, *map(str, arguments)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip().splitlines()[-1].split()


@pytest.mark.skipif(
    keras.config.backend() != "tensorflow", reason="TensorFlow's threads"
)
# One core (a share of at least one), an even and an odd count.
@pytest.mark.parametrize("cpu_count", [1, 2, 5])
def test_sets_the_cores_share_before_the_runtime_starts(cpu_count):
    # In a fresh process, as the recipe calls it; a second call finds the
    # threads set and leaves them.
    share = max(1, cpu_count // CHAINS)
    assert probe(cpu_count) == [str(share), "None", str(share), "0"]


@pytest.mark.skipif(
    keras.config.backend() != "tensorflow", reason="TensorFlow's threads"
)
def test_warns_and_changes_nothing_once_the_runtime_started():
    assert probe(2, "late") == ["None", "None", "0", "2"]


@pytest.mark.skipif(
    keras.config.backend() != "tensorflow", reason="TensorFlow's threads"
)
def test_leaves_the_threads_where_tensorflow_sees_a_gpu():
    assert probe(2, "gpu") == ["None", "None", "0", "0"]
