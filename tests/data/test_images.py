import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_gmlp.data import image_sources
from keras_gmlp.data import images
from keras_gmlp.data.augment import AugmentConfig
from keras_gmlp.data.image_sources import DataError
from tests.data.test_image_sources import collect
from tests.data.test_image_sources import write_cifar_binaries


def test_training_batches_sizes_ranges_and_mixed_labels():
    data = image_sources.load_images("digits")
    augment = AugmentConfig(flip=True, randaugment_ops=0, mixup=0.8, cutmix=1.0)
    dataset = images.batches(data, "train", 32, (16, 16), True, augment, seed=1)
    x, y = next(iter(dataset))
    assert x.shape == (32, 16, 16, 1) and y.shape == (32, 10)
    assert -1.0 <= float(tf.reduce_min(x)) and float(tf.reduce_max(x)) <= 1.0
    np.testing.assert_allclose(tf.reduce_sum(y, axis=1), 1.0, rtol=1e-5)
    assert float(tf.reduce_max(y)) <= 1.0
    # 1437 // 32 full batches: the remainder is dropped.
    assert int(dataset.cardinality()) == 1437 // 32


def test_validation_batches_are_deterministic_and_complete():
    data = image_sources.load_images("digits")
    dataset = images.batches(data, "validation", 100, (8, 8), False)
    labels = np.concatenate([y for _, y in dataset])
    assert labels.shape == (360, 10)
    x, _ = next(iter(dataset))
    first = collect(data.validation.take(1))[0][0]
    np.testing.assert_allclose(x[0], first / 127.5 - 1.0, atol=1e-6)


# Under the JAX backend, tracing Keras' RandAugment into tf.data takes about
# 30 s (1 s under TensorFlow and torch): slow-marked there.
RANDAUGMENT_OPS = [
    pytest.param(
        2,
        marks=[pytest.mark.large] if keras.config.backend() == "jax" else [],
    ),
    0,
]


@pytest.mark.parametrize("randaugment_ops", RANDAUGMENT_OPS)
def test_cifar_style_augmentation(tmp_path, rng, randaugment_ops):
    write_cifar_binaries(tmp_path, "cifar10", rng, per_file=4)
    data = image_sources.load_images("cifar10", str(tmp_path))
    augment = AugmentConfig(
        crop_padding=4, randaugment_ops=randaugment_ops, random_erasing=0.5
    )
    dataset = images.batches(data, "train", 8, (32, 32), True, augment, seed=0)
    x, y = next(iter(dataset))
    assert x.shape == (8, 32, 32, 3) and y.shape == (8, 10)
    assert np.isfinite(x.numpy()).all()


def test_batch_larger_than_split_is_an_error():
    data = image_sources.load_images("digits")
    with pytest.raises(DataError, match="fewer than one batch of 2048"):
        images.batches(data, "train", 2048, (16, 16), True)


def test_even_batch_size_is_the_smallest_with_as_few_batches():
    # Brute force: of the sizes up to `batch_size` that need no more
    # batches than `batch_size` does, the smallest.
    for num_examples in range(1, 130):
        for batch_size in range(1, 70):
            fewest = math.ceil(num_examples / batch_size)
            expected = min(
                size
                for size in range(1, batch_size + 1)
                if math.ceil(num_examples / size) == fewest
            )
            assert images.even_batch_size(num_examples, batch_size) == expected


def test_even_batch_size_splits_divisible_counts_equally():
    assert images.even_batch_size(360, 64) == 60
    assert images.even_batch_size(1000, 128) == 125
    assert images.even_batch_size(0, 32) == 32


@pytest.mark.parametrize(
    "num_examples, batch_size, match",
    [(10, 0, "batch_size must be >= 1, got 0"), (-1, 8, "got -1")],
)
def test_even_batch_size_names_bad_values(num_examples, batch_size, match):
    with pytest.raises(ValueError, match=match):
        images.even_batch_size(num_examples, batch_size)
