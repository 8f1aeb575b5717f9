"""A gMLP trained on digits at 16 x 16 keeps most of its accuracy when
`keras_gmlp.convert.resize_image_model` resamples it to 24 x 24.

It is trained on scikit-learn's digits (8 x 8, upsampled by its converter to
16 x 16, patch 4: a 4 x 4 token grid), resized to 24 x 24 (a 6 x 6 grid), and
compared with two controls at 24 x 24: the spatial weights at their
initialisation (W = 0, b = 1), and the 16 x 16 weights copied into the
6 x 6 grid's top-left 4 x 4 tokens (nothing resampled).
"""

import keras
import numpy as np
import pytest

from keras_gmlp.convert import resize_image_model
from keras_gmlp.models import GMLPImageBackbone
from keras_gmlp.models import GMLPImageClassifier
from keras_gmlp.models import GMLPImageClassifierPreprocessor
from keras_gmlp.models import GMLPImageConverter


def digits(seed=0, test_fraction=0.25):
    """Digits as uint8 images `(n, 8, 8, 1)`, split into train and test."""
    from sklearn.datasets import load_digits

    data = load_digits()
    images = np.round(data.images * (255 / 16)).astype("uint8")[..., None]
    order = np.random.default_rng(seed).permutation(len(images))
    split = int(len(images) * (1 - test_fraction))
    train, test = order[:split], order[split:]
    return (images[train], data.target[train]), (
        images[test],
        data.target[test],
    )


def classifier(image_size, seed, num_layers=2, hidden_dim=32, ffn_dim=64):
    keras.utils.set_random_seed(seed)
    backbone = GMLPImageBackbone(
        image_size=image_size,
        patch_size=4,
        num_layers=num_layers,
        hidden_dim=hidden_dim,
        ffn_dim=ffn_dim,
        num_channels=1,
    )
    converter = GMLPImageConverter(image_size=(image_size, image_size))
    return GMLPImageClassifier(
        backbone,
        num_classes=10,
        preprocessor=GMLPImageClassifierPreprocessor(converter),
    )


def accuracy(model, images, labels):
    logits = model.predict(images, batch_size=256, verbose=0)
    return float((logits.argmax(-1) == labels).mean())


def spatial_units(model):
    return [
        layer.spatial_gating_unit
        for layer in model.backbone.layers
        if layer.name.startswith("block_")
    ]


def measure(epochs=30, seed=0, source_size=16, target_size=24):
    """Trains at `source_size`, returns the accuracies as a dict."""
    (train_x, train_y), (test_x, test_y) = digits(seed)
    model = classifier(source_size, seed)
    model.fit(train_x, train_y, batch_size=64, epochs=epochs, verbose=0)
    resized = resize_image_model(model, target_size)
    reset = resize_image_model(model, target_size)
    for unit in spatial_units(reset):
        unit.kernel.assign(np.zeros(unit.kernel.shape, "float32"))
        unit.bias.assign(np.ones(unit.bias.shape, "float32"))
    corner = resize_image_model(model, target_size)
    source_grid, target_grid = source_size // 4, target_size // 4
    rows = np.arange(target_grid * target_grid).reshape(target_grid, -1)
    kept = rows[:source_grid, :source_grid].reshape(-1)
    for old, new in zip(
        spatial_units(model), spatial_units(corner), strict=True
    ):
        kernel = np.zeros(new.kernel.shape, "float32")
        bias = np.ones(new.bias.shape, "float32")
        kernel[np.ix_(kept, kept)] = keras.ops.convert_to_numpy(old.kernel)
        bias[kept] = keras.ops.convert_to_numpy(old.bias)
        new.kernel.assign(kernel)
        new.bias.assign(bias)
    return {
        "epochs": epochs,
        "seed": seed,
        "train_examples": len(train_x),
        "test_examples": len(test_x),
        f"accuracy_{source_size}": accuracy(model, test_x, test_y),
        f"accuracy_{target_size}_resampled": accuracy(resized, test_x, test_y),
        f"accuracy_{target_size}_spatial_reset": accuracy(
            reset, test_x, test_y
        ),
        f"accuracy_{target_size}_corner_copied": accuracy(
            corner, test_x, test_y
        ),
    }


@pytest.mark.large
def test_digits_model_keeps_most_of_its_accuracy_resampled_to_24():
    pytest.importorskip("sklearn")
    result = measure(epochs=15, seed=0)
    trained = result["accuracy_16"]
    resampled = result["accuracy_24_resampled"]
    assert trained > 0.9
    assert resampled > 0.6 * trained
    # Far above the 24 x 24 models whose spatial weights were not
    # resampled (initial, or the trained ones in a corner of the grid).
    assert resampled > result["accuracy_24_spatial_reset"] + 0.3
    assert resampled > result["accuracy_24_corner_copied"] + 0.3
