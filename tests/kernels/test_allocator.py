"""`keras_gmlp.kernels.reuse_freed_memory`: a JAX computation's freed
temporaries are reused, already in memory, by the next call (the
program's call of it, through `configure_training_process`, is tested in
tests/kernels/test_process.py).

Each case runs in a fresh process: the settings hold for the whole
process, and JAX reads its own when it starts.
"""

import json
import os
import platform
import subprocess
import sys

import pytest

from keras_gmlp.kernels import allocator
from tests.page_faults import SECOND_FILL_FAULTS

# A jitted function whose XLA temporaries take about 98 MiB (25,000
# pages), run five times; prints the minor page faults of the last three.
THIRD_RUN_FAULTS = """
import json, resource, sys, warnings
import keras_gmlp
from keras_gmlp.kernels import reuse_freed_memory
import jax
import jax.numpy as jnp

if "start-jax-first" in sys.argv:
    jnp.ones(1).block_until_ready()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    applied = reuse_freed_memory() if "reuse" in sys.argv else None

@jax.jit
def scan_product(x):
    running = jnp.cumsum(x, axis=0)
    return jnp.sum(running * running[::-1])

x = jnp.ones((1024, 8192), jnp.float32)
compiled = scan_product.lower(x).compile()
temporaries = compiled.memory_analysis().temp_size_in_bytes
for _ in range(2):
    scan_product(x).block_until_ready()
faults = []
for _ in range(3):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    scan_product(x).block_until_ready()
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps({
    "applied": applied,
    "faults": faults,
    "temporaries": temporaries,
    "warnings": [str(w.message) for w in caught],
}))
"""

glibc_only = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
    reason="glibc's allocator",
)


def run_script(backend, *flags, script=THIRD_RUN_FAULTS, **environment):
    env = dict(os.environ, KERAS_BACKEND=backend)
    for name in (
        "MALLOC_ARENA_MAX",
        "MALLOC_MMAP_MAX_",
        "GLIBC_TUNABLES",
        allocator.ENV_VARIABLE,
    ):
        env.pop(name, None)
    env.update(environment)
    result = subprocess.run(
        [sys.executable, "-c", script, *flags],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


# Page-fault counts depend on the host's memory layout and load (a shared
# 2-core machine once saw a whole run fault in afresh with the settings
# applied), so the counts are checked under `-m large`; the default suite
# checks that the settings apply and warn as documented.
@glibc_only
@pytest.mark.one_backend("jax")
def test_jax_applies_the_settings_without_a_warning():
    reused = run_script("jax", "reuse")

    assert reused["applied"] is True
    assert reused["warnings"] == []


@glibc_only
@pytest.mark.large
@pytest.mark.one_backend("jax")
def test_jax_reuses_freed_temporaries_without_faulting_them_in():
    default = run_script("jax")
    reused = run_script("jax", "reuse")

    pages = default["temporaries"] // 4096
    assert pages > 20_000
    # By default each run maps its temporaries afresh and faults them in.
    assert min(default["faults"]) > pages * 0.8
    assert reused["applied"] is True
    assert reused["warnings"] == []
    assert min(reused["faults"]) < pages / 10


@glibc_only
@pytest.mark.one_backend("jax")
def test_the_environment_turns_it_off():
    result = run_script("jax", "reuse", **{allocator.ENV_VARIABLE: "0"})

    assert result["applied"] is False
    assert result["warnings"] == []
    assert min(result["faults"]) > result["temporaries"] // 4096 * 0.8


@glibc_only
@pytest.mark.one_backend("jax")
def test_after_jax_started_it_warns_and_changes_nothing():
    late = run_script("jax", "start-jax-first", "reuse")

    assert late["applied"] is False
    assert len(late["warnings"]) == 1
    assert "before the first JAX computation" in late["warnings"][0]
    assert min(late["faults"]) > late["temporaries"] // 4096 * 0.8


# Whether glibc's main heap keeps a freed large buffer: the faults of
# refilling it.
MAIN_THREAD_FAULTS = (
    SECOND_FILL_FAULTS
    + """
import json
import keras_gmlp
from keras_gmlp.kernels import reuse_freed_memory

applied = reuse_freed_memory()
print(json.dumps({"applied": applied, "faults": second_fill_faults()}))
"""
)


@glibc_only
@pytest.mark.parametrize(
    "backend",
    [
        pytest.param(name, marks=pytest.mark.one_backend(name))
        for name in ("tensorflow", "torch")
    ],
)
def test_other_backends_keep_glibcs_settings(backend):
    result = run_script(backend, script=MAIN_THREAD_FAULTS)

    assert result["applied"] is False
    assert result["faults"] > 20_000


@glibc_only
@pytest.mark.one_backend("jax")
def test_jax_main_heap_keeps_a_freed_large_buffer():
    result = run_script("jax", script=MAIN_THREAD_FAULTS)

    assert result["applied"] is True
    assert result["faults"] < 2_000


# A gMLP classifier's `fit` on tf.data, 6 MiB batches (Keras copies
# them to numpy arrays that do not start on 64 bytes) and a training step
# whose XLA temporaries take some 200 MiB; prints the minor page faults
# of each step after the second.
FIT_STEP_FAULTS = """
import json, resource, sys
from keras_gmlp.kernels import reuse_freed_memory

applied = reuse_freed_memory() if "reuse" in sys.argv else None
import keras
import numpy as np
import tensorflow as tf
from keras_gmlp.models import GMLPImageBackbone, GMLPImageClassifier


class StepFaults(keras.callbacks.Callback):
    counts = []

    def on_train_batch_end(self, batch, logs=None):
        self.counts.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt)


backbone = GMLPImageBackbone(
    image_size=32, patch_size=4, num_layers=2, hidden_dim=64, ffn_dim=256
)
model = GMLPImageClassifier(backbone=backbone, num_classes=10)
model.compile(
    optimizer="sgd",
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
)
images = np.random.default_rng(0).uniform(size=(512, 32, 32, 3))
batch = (images.astype("float32"), np.zeros(512, "int32"))
dataset = tf.data.Dataset.from_tensors(batch).repeat(8)
model.fit(dataset, verbose=0, callbacks=[StepFaults()])
counts = StepFaults.counts
print(json.dumps({
    "applied": applied,
    "faults": [b - a for a, b in zip(counts[1:], counts[2:])],
}))
"""


# End to end (two fresh processes that train, some 40 s): `-m large`. The
# default suite checks its parts: `with_ready_inputs` below, every task's
# steps wrapped in it (tests/models/test_gmlp_task.py) and the main heap's
# faults above.
@glibc_only
@pytest.mark.large
def test_fit_on_tf_data_reuses_every_steps_buffer():
    default = run_script("jax", script=FIT_STEP_FAULTS)
    reused = run_script("jax", "reuse", script=FIT_STEP_FAULTS)

    batch_pages = 512 * 32 * 32 * 3 * 4 // 4096
    assert len(default["faults"]) == len(reused["faults"]) == 6
    # By default each step maps its temporaries afresh (about 88,000
    # pages), ten times the batch's pages and more.
    assert min(default["faults"]) > 10 * batch_pages
    # With it, every step runs on the calling thread and reuses them; a
    # step that ran on one of JAX's threads would fault them all.
    assert reused["applied"] is True
    assert max(reused["faults"]) < min(default["faults"]) / 10


@pytest.mark.one_backend("jax")
def test_with_ready_inputs_hands_the_step_its_batch_on_the_device():
    import jax
    import numpy as np

    # 1 MiB that starts 16 bytes past a 64-byte boundary: JAX copies it
    # on one of its own threads.
    storage = np.zeros(2**18 + 16, np.float32)
    offset = (-storage.ctypes.data % 64 + 16) % 64 // 4
    images = storage[offset : offset + 2**18].reshape(64, 64, 64)
    assert images.ctypes.data % 64 == 16
    labels = np.arange(64)
    received = []

    def step(state, batches):
        # Keras 3.15 passes an iterator of batches, earlier Keras a batch.
        batch = next(batches) if hasattr(batches, "__next__") else batches
        received.append(jax.tree_util.tree_leaves(batch))
        return {"loss": 0.0}, state

    asynchronous = jax.config.read("jax_cpu_enable_async_dispatch")
    jax.config.update("jax_cpu_enable_async_dispatch", False)
    try:
        wrapped = allocator.with_ready_inputs(step)
        assert allocator.with_ready_inputs(wrapped) is wrapped
        logs, state = wrapped("state", iter([(images, labels, None)]))
        wrapped("state", (images, labels))
    finally:
        jax.config.update("jax_cpu_enable_async_dispatch", asynchronous)

    assert state == "state" and logs == {"loss": 0.0}
    assert len(received) == 2
    for leaves in received:
        assert len(leaves) == 2
        assert all(isinstance(leaf, jax.Array) for leaf in leaves)
        assert all(leaf.is_ready() for leaf in leaves)
        np.testing.assert_array_equal(leaves[0], images)
        np.testing.assert_array_equal(leaves[1], labels)
    # With asynchronous dispatch on, the step is left as it is.
    jax.config.update("jax_cpu_enable_async_dispatch", True)
    try:
        assert allocator.with_ready_inputs(step) is step
    finally:
        jax.config.update("jax_cpu_enable_async_dispatch", asynchronous)


@pytest.mark.parametrize("dtype", ["float32", "int32", "bool", "float16"])
def test_aligned_copies_only_what_does_not_start_on_64_bytes(dtype):
    import numpy as np

    storage = np.zeros(4096 + 64, np.uint8)
    base = -storage.ctypes.data % 64
    values = np.random.default_rng(0).integers(0, 2, (8, 16)).astype(dtype)
    size = values.nbytes
    for offset in (0, 16, 32, 48):
        array = storage[base + offset : base + offset + size].view(dtype)
        array = array.reshape(values.shape)
        array[...] = values

        result = allocator.aligned(array)

        assert result.ctypes.data % 64 == 0
        assert (result is array) == (offset == 0)
        assert result.dtype == values.dtype
        np.testing.assert_array_equal(result, values)
    # A strided view is copied into C order.
    columns = allocator.aligned(values[:, ::2])
    assert columns.flags.c_contiguous
    np.testing.assert_array_equal(columns, values[:, ::2])
