"""`keras_gmlp.training.prefer_wide_vectors`: XLA:CPU's 512-bit vectors for
TensorFlow's XLA functions, where the CPU has AVX-512."""

import subprocess
import sys

import keras
import pytest

from keras_gmlp.training import xla_flags
from keras_gmlp.training.xla_flags import prefer_wide_vectors

AVX512 = "flags\t\t: fpu fma avx2 avx512f avx512_bf16\n"
AVX2 = "flags\t\t: fpu fma avx2\n"


@pytest.fixture
def cpuinfo(tmp_path):
    """A function writing a cpuinfo file of `flags_line`, returning its
    path."""

    def write(flags_line):
        path = tmp_path / f"cpuinfo{len(list(tmp_path.iterdir()))}"
        path.write_text("processor\t: 0\n" + flags_line)
        return str(path)

    return write


@pytest.fixture
def environment(monkeypatch):
    """The test's own `XLA_FLAGS` and opt-out variable (none set), under
    the TensorFlow backend as the function sees it."""
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    monkeypatch.delenv(xla_flags.ENV_VARIABLE, raising=False)
    monkeypatch.setattr(keras.config, "backend", lambda: "tensorflow")
    return monkeypatch


def test_adds_the_flag_under_tensorflow_with_avx512(environment, cpuinfo):
    import os

    environment.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/somewhere")
    assert prefer_wide_vectors(cpuinfo(AVX512)) is True
    assert os.environ["XLA_FLAGS"] == (
        "--xla_dump_to=/tmp/somewhere --xla_cpu_prefer_vector_width=512"
    )
    # Called again, it finds the width set and leaves it.
    assert prefer_wide_vectors(cpuinfo(AVX512)) is False
    assert os.environ["XLA_FLAGS"].count("prefer_vector_width") == 1


@pytest.mark.parametrize(
    "case", ["avx2", "jax", "torch", "opted_out", "width_set"]
)
def test_leaves_xla_flags_alone(case, environment, cpuinfo):
    import os

    flags_line = AVX2 if case == "avx2" else AVX512
    if case in ("jax", "torch"):
        environment.setattr(keras.config, "backend", lambda: case)
    if case == "opted_out":
        environment.setenv(xla_flags.ENV_VARIABLE, "0")
    if case == "width_set":
        environment.setenv("XLA_FLAGS", "--xla_cpu_prefer_vector_width=256")
    before = os.environ.get("XLA_FLAGS")
    assert prefer_wide_vectors(cpuinfo(flags_line)) is False
    assert os.environ.get("XLA_FLAGS") == before


PROBE = """
import os
os.environ["KERAS_BACKEND"] = "tensorflow"
import tensorflow as tf
from keras_gmlp.training import prefer_wide_vectors

added = prefer_wide_vectors(os.environ["PROBE_CPUINFO"])
f = tf.function(lambda x: x * 2.0 + 1.0, jit_compile=True)
f(tf.ones((4,)))
print(added, os.environ.get("XLA_FLAGS", ""))
"""


@pytest.mark.skipif(
    keras.config.backend() != "tensorflow", reason="TensorFlow's XLA"
)
def test_the_flag_reaches_a_tensorflow_xla_function(cpuinfo, tmp_path):
    # In a fresh process, as the recipes call it: XLA reads the flags at
    # its first compilation, and dumps that compilation where the same
    # XLA_FLAGS say, so the dump shows the added flag was read with them.
    import os

    dump = tmp_path / "dump"
    env = dict(os.environ, PROBE_CPUINFO=cpuinfo(AVX512))
    env["XLA_FLAGS"] = f"--xla_dump_to={dump}"
    env.pop(xla_flags.ENV_VARIABLE, None)
    result = subprocess.run(
        [sys.executable, "-c", PROBE],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    added, flags = result.stdout.strip().splitlines()[-1].split(" ", 1)
    assert added == "True"
    assert flags.endswith("--xla_cpu_prefer_vector_width=512")
    assert any(dump.iterdir())
