"""`keras_gmlp.kernels.configure_training_process`: the process settings
of the training jobs, each checked by its effect in a fresh process of
this suite's backend (the settings' own cases are in test_allocator.py,
test_threads.py and test_xla_flags.py)."""

import json
import os
import platform
import sys

import keras
import pytest

from keras_gmlp import cli
from keras_gmlp.kernels import allocator
from keras_gmlp.kernels import jax_draws
from keras_gmlp.kernels import threads
from keras_gmlp.kernels import xla_flags
from keras_gmlp.kernels.batch_chains import CHAINS
from keras_gmlp.kernels.batch_chains import usable_cores
from keras_gmlp.kernels.cpu_features import has_avx512
from tests.fresh_python import last_line_of

OPT_OUTS = {
    allocator.ENV_VARIABLE: "0",
    xla_flags.ENV_VARIABLE: "0",
    xla_flags.YNN_ENV_VARIABLE: "1",
    threads.ENV_VARIABLE: "0",
    jax_draws.ENV_VARIABLE: "0",
}

PROBE = """
import json, os
from keras_gmlp.kernels import configure_training_process

returned = configure_training_process()
import keras

report = dict(returned=returned, xla_flags=os.environ.get("XLA_FLAGS", ""))
if keras.config.backend() == "tensorflow":
    import tensorflow as tf

    report["threads"] = tf.config.threading.get_intra_op_parallelism_threads()
if keras.config.backend() == "jax":
    import jax

    jax.numpy.ones(3).block_until_ready()  # JAX's CPU client started
    report["async"] = jax.config.read("jax_cpu_enable_async_dispatch")
    from keras.src.backend.jax import random as keras_jax_random

    report["draws_module"] = keras_jax_random.uniform.__module__
print(json.dumps(report))
"""


def configured(opted_out):
    """`PROBE`'s report, run under this suite's backend, with every
    setting's opt-out variable set if `opted_out` (none otherwise)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in OPT_OUTS and key != "TF_NUM_INTRAOP_THREADS"
    }
    if opted_out:
        env.update(OPT_OUTS)
    return json.loads(last_line_of(PROBE, env))


def test_the_jobs_settings_take_effect():
    backend = keras.config.backend()
    before = os.environ.get("XLA_FLAGS", "")
    report = configured(opted_out=False)
    returned = report["returned"]
    glibc = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"
    assert returned["reuse_freed_memory"] is (backend == "jax" and glibc)
    if backend == "tensorflow":
        wide = ["--xla_cpu_prefer_vector_width=512"] if has_avx512() else []
        added = [*wide, "--xla_cpu_experimental_ynn_fusion_type="]
        assert returned["set_job_xla_flags"] == added
        assert report["xla_flags"].split() == before.split() + added
        expected_threads = max(1, usable_cores() // CHAINS)
        assert returned["share_cores_between_chains"] == expected_threads
        assert report["threads"] == expected_threads
    else:
        assert returned["set_job_xla_flags"] == []
        assert report["xla_flags"] == before
        assert returned["share_cores_between_chains"] is None
    assert returned["compile_jax_draws_once"] is (backend == "jax")
    if backend == "jax":
        # Each step on the calling thread, which keeps the freed buffer.
        assert report["async"] is not glibc
        assert report["draws_module"] == jax_draws.__name__


@pytest.mark.skipif(
    keras.config.backend() == "torch", reason="no setting is torch's"
)
def test_each_setting_has_its_opt_out():
    backend = keras.config.backend()
    report = configured(opted_out=True)
    assert report["returned"] == {
        "reuse_freed_memory": False,
        "set_job_xla_flags": [],
        "share_cores_between_chains": None,
        "compile_jax_draws_once": False,
    }
    assert report["xla_flags"] == os.environ.get("XLA_FLAGS", "")
    if backend == "tensorflow":
        assert report["threads"] == 0  # TensorFlow's default: every core
    if backend == "jax":
        assert report["async"] is True
        assert report["draws_module"] == "keras.src.backend.jax.random"


@pytest.mark.parametrize(
    "argv, shared",
    [
        (["train-image-classifier", "--dataset", "digits"], True),
        (["pretrain", "--text-files", "corpus.txt"], True),
        (["info", "gmlp_ti16_224"], False),
    ],
)
def test_the_program_configures_the_process_before_its_command(
    argv, shared, monkeypatch
):
    # The settings (threads, memory, XLA flags), before the command's work.
    events = []
    monkeypatch.setattr(cli, "_train", lambda args: events.append("train"))
    monkeypatch.setattr(cli, "_info", lambda args: events.append("info"))
    monkeypatch.setattr(
        "keras_gmlp.kernels.configure_training_process",
        lambda: events.append("configure"),
    )
    monkeypatch.setattr(
        "keras_gmlp.kernels.compile_jax_draws_once",
        lambda: events.append("draws"),
    )
    monkeypatch.setattr(sys, "argv", ["keras-gmlp", *argv])

    assert cli.main() == 0
    assert events == (["configure", "train"] if shared else ["draws", "info"])
    events.clear()
    assert cli.main(argv) == 0
    assert events == ["train" if shared else "info"]
