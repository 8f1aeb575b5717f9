"""Loads `.keras` files after `import keras_gmlp.models` and predicts.

Usage: python predict_saved.py FOLDER. For each `NAME.keras` in FOLDER it
reads the inputs `NAME.inputs.npy` and writes `NAME.<backend>.npy`.
"""

import pathlib
import sys

import keras
import numpy as np

import keras_gmlp.models  # noqa: F401  (registers the classes)

folder = pathlib.Path(sys.argv[1])
for path in sorted(folder.glob("*.keras")):
    name = path.name[: -len(".keras")]
    model = keras.saving.load_model(path)
    if keras.config.backend() == "torch":
        # Compiled with the default jit_compile="auto": eager on torch.
        assert model.jit_compile is False, f"{name}: torch.compile on load"
    inputs = np.load(folder / f"{name}.inputs.npy")
    outputs = keras.ops.convert_to_numpy(model.predict_on_batch(inputs))
    np.save(folder / f"{name}.{keras.config.backend()}.npy", outputs)
