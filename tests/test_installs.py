"""Each install line of the README works in a fresh virtualenv.

`pip install -c constraints.txt -e ".[EXTRA]"` into a new virtualenv, then
that virtualenv's Python imports the package under the extra's backend,
builds a preset classifier with its preprocessor and classifies uint8
images. Slow (a few minutes; pip's wheel cache is shared): `make
test-installs` runs it, and so does CI.
"""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

# What each extra is for: the backend its check runs under.
EXTRAS = {"tensorflow": "tensorflow", "jax": "jax", "torch": "torch"}

CHECK = """
import keras
import numpy as np

import keras_gmlp

classifier = keras_gmlp.GMLPImageClassifier.from_preset(
    "gmlp_micro4_32", num_classes=3
)
images = np.random.default_rng(0).integers(0, 256, (2, 40, 40, 3), "uint8")
probabilities = keras.ops.softmax(classifier.predict(images, verbose=0))
probabilities = keras.ops.convert_to_numpy(probabilities)
assert probabilities.shape == (2, 3), probabilities.shape
assert np.allclose(probabilities.sum(-1), 1.0, atol=1e-5)
print("backend", keras.config.backend(), "ok")
"""


def run(command, **kwargs):
    result = subprocess.run(
        command, capture_output=True, text=True, check=False, **kwargs
    )
    assert result.returncode == 0, (
        f"{' '.join(map(str, command))} exited {result.returncode}:\n"
        f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    )
    return result.stdout


@pytest.mark.large
@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_the_documented_install_line_works_in_a_fresh_virtualenv(
    extra, tmp_path
):
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    run(
        [python, "-m", "pip", "install", "-q", "-c", "constraints.txt"]
        + ["-e", f".[{extra}]"],
        cwd=ROOT,
    )
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("KERAS_", "PYTHON", "XLA_"))
    }
    environment["KERAS_BACKEND"] = EXTRAS[extra]
    output = run([python, "-c", CHECK], cwd=tmp_path, env=environment)
    assert f"backend {EXTRAS[extra]} ok" in output
