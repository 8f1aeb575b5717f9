"""`keras_gmlp.kernels.prefer_wide_vectors`: XLA:CPU's 512-bit vectors for
TensorFlow's XLA functions, where the CPU has AVX-512; `skip_ynn_fusions`:
no YNNPACK fusions in them; `set_job_xla_flags`: both, as the jobs set
them."""

import keras
import pytest

from keras_gmlp.kernels import xla_flags
from keras_gmlp.kernels.xla_flags import prefer_wide_vectors
from keras_gmlp.kernels.xla_flags import set_job_xla_flags
from keras_gmlp.kernels.xla_flags import skip_ynn_fusions
from tests.fresh_python import last_line_of

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
    monkeypatch.delenv(xla_flags.YNN_ENV_VARIABLE, raising=False)
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
from keras_gmlp.kernels import prefer_wide_vectors

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
    added, flags = last_line_of(PROBE, env).split(" ", 1)
    assert added == "True"
    assert flags.endswith("--xla_cpu_prefer_vector_width=512")
    assert any(dump.iterdir())


def test_skips_ynn_fusions_under_tensorflow(environment):
    import os

    environment.setenv("XLA_FLAGS", "--xla_cpu_prefer_vector_width=512")
    assert skip_ynn_fusions() is True
    assert os.environ["XLA_FLAGS"] == (
        "--xla_cpu_prefer_vector_width=512 "
        "--xla_cpu_experimental_ynn_fusion_type="
    )
    assert skip_ynn_fusions() is False
    assert os.environ["XLA_FLAGS"].count("ynn_fusion_type") == 1


@pytest.mark.parametrize("case", ["jax", "torch", "opted_out", "kinds_set"])
def test_leaves_the_ynn_fusions_alone(case, environment):
    import os

    if case in ("jax", "torch"):
        environment.setattr(keras.config, "backend", lambda: case)
    if case == "opted_out":
        environment.setenv(xla_flags.YNN_ENV_VARIABLE, "1")
    if case == "kinds_set":
        environment.setenv(
            "XLA_FLAGS", "--xla_cpu_experimental_ynn_fusion_type=reduce"
        )
    before = os.environ.get("XLA_FLAGS")
    assert skip_ynn_fusions() is False
    assert os.environ.get("XLA_FLAGS") == before


YNN_PROBE = """
import os
os.environ["KERAS_BACKEND"] = "tensorflow"
import tensorflow as tf
from keras_gmlp.kernels import skip_ynn_fusions

skipped = skip_ynn_fusions()
# A loss's reductions over the vocabulary, as the masked LM's.
f = tf.function(
    lambda x: tf.reduce_logsumexp(x, axis=-1) - tf.reduce_max(x, axis=-1),
    jit_compile=True,
)
f(tf.random.normal((256, 1000)))
print(skipped)
"""


def ynn_fusions_compiled(opted_out, dump):
    """How many YNNPACK fusions `YNN_PROBE`'s function compiled to, in a
    fresh process (`KERAS_GMLP_YNN_FUSIONS=1` if `opted_out`); XLA:CPU's
    optimised HLO names each `__ynn_fusion`."""
    import os

    env = dict(os.environ)
    env[xla_flags.YNN_ENV_VARIABLE] = "1" if opted_out else "0"
    env["XLA_FLAGS"] = f"--xla_dump_to={dump} --xla_dump_hlo_as_text"
    assert last_line_of(YNN_PROBE, env) == str(not opted_out)
    optimised = list(dump.glob("*cpu_after_optimizations.txt"))
    assert optimised
    return sum(path.read_text().count("__ynn_fusion") for path in optimised)


@pytest.mark.skipif(
    keras.config.backend() != "tensorflow", reason="TensorFlow's XLA"
)
def test_a_tensorflow_xla_function_compiles_no_ynn_fusion(tmp_path):
    opted_out = ynn_fusions_compiled(True, tmp_path / "opted_out")
    if not opted_out:
        pytest.skip("this CPU's XLA:CPU makes no YNNPACK fusion of it")
    assert ynn_fusions_compiled(False, tmp_path / "skipped") == 0


@pytest.mark.parametrize("flags_line", [AVX512, AVX2], ids=["avx512", "avx2"])
def test_the_jobs_flags_under_tensorflow(flags_line, environment, cpuinfo):
    import os

    environment.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/somewhere")
    wide = ["--xla_cpu_prefer_vector_width=512"] if flags_line == AVX512 else []
    expected = [*wide, "--xla_cpu_experimental_ynn_fusion_type="]
    assert set_job_xla_flags(cpuinfo(flags_line)) == tuple(expected)
    assert os.environ["XLA_FLAGS"].split() == [
        "--xla_dump_to=/tmp/somewhere",
        *expected,
    ]
    # Set once: a second call adds nothing.
    assert set_job_xla_flags(cpuinfo(flags_line)) == ()
    assert len(os.environ["XLA_FLAGS"].split()) == 1 + len(expected)


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_the_jobs_flags_leave_other_backends_alone(
    backend, environment, cpuinfo
):
    import os

    environment.setattr(keras.config, "backend", lambda: backend)
    assert set_job_xla_flags(cpuinfo(AVX512)) == ()
    assert "XLA_FLAGS" not in os.environ
