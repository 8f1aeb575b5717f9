"""The image classification input pipeline: sized, augmented, batched.

`batches(data, split, ...)` turns a split of a
`keras_gmlp.data.image_sources.ImageDataset` into the batches a model
trains or is evaluated on: sized and augmented pixels in [0, 255], for a
task whose preprocessor (`GMLPImageConverter`) scales them as it does when
serving, or scaled to [-1, 1] here (`normalize_images`) for a bare model.
"""

import tensorflow as tf

from keras_gmlp.data.image_sources import DataError

CACHE_LIMIT_BYTES = 2 * 1024**3
PIXEL_SCALE = 1 / 127.5
PIXEL_OFFSET = -1.0


def normalize_images(images):
    """Float pixels in [0, 255] -> [-1, 1], the models' input range.

    The serving signature of `keras_gmlp.export` applies the same
    `keras.layers.Rescaling(PIXEL_SCALE, offset=PIXEL_OFFSET)`.
    """
    return images * PIXEL_SCALE + PIXEL_OFFSET


def even_batch_size(num_examples, batch_size):
    """The batch size that splits `num_examples` most evenly.

    As many batches as `batch_size` needs, `ceil(num_examples /
    batch_size)`, each of at most `batch_size` examples and all of one
    size when that count divides `num_examples`. Evaluation in batches of
    one shape runs one compiled test step under JAX, which compiles
    another for a short last batch.

    Args:
        num_examples: int. Examples to batch.
        batch_size: int. The largest batch.

    Returns:
        int. At most `batch_size`; `batch_size` when `num_examples` is 0.

    Example:

    >>> from keras_gmlp.data.images import even_batch_size
    >>> even_batch_size(360, 64), even_batch_size(256, 64)
    (60, 64)
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}.")
    if num_examples < 0:
        raise ValueError(f"num_examples must be >= 0, got {num_examples}.")
    if num_examples == 0:
        return batch_size
    num_batches = -(-num_examples // batch_size)
    return -(-num_examples // num_batches)


def batches(
    data,
    split,
    batch_size,
    image_size,
    training,
    augment=None,
    seed=None,
    drop_remainder=None,
    cache=None,
    shuffle_buffer=10000,
    normalize=True,
):
    """The input pipeline of a split: decoded, sized, augmented, batched.

    Training: cache (where it fits), shuffle, per-image geometry and
    RandAugment, `drop_remainder` batches, MixUp/CutMix and random erasing,
    normalisation to [-1, 1] (unless `normalize=False`), one-hot labels,
    prefetch. Evaluation: resize (or centre crop for varying sizes),
    normalise, batch, prefetch. Every `map` runs with
    `num_parallel_calls=AUTOTUNE`.

    Args:
        data: `keras_gmlp.data.image_sources.ImageDataset`.
        split: str. `"train"` or `"validation"`.
        batch_size: int. Global batch size.
        image_size: `(height, width)` of the model's input.
        training: bool. Whether to shuffle and augment.
        augment: `AugmentConfig` or `None` (no augmentation).
        seed: int or `None`. Shuffle and augmentation seed.
        drop_remainder: bool or `None`. Defaults to `training`.
        cache: bool or `None`. Cache decoded images in memory; defaults to
            caching when the split fits in 2 GiB.
        shuffle_buffer: int. Shuffle buffer size. Defaults to `10000`.
        normalize: bool. Whether to scale the pixels to [-1, 1]; `False`
            leaves them in [0, 255] for a task's preprocessor. Defaults to
            `True`.

    Returns:
        A `tf.data.Dataset` of `(float32 images (batch, height, width,
        channels) in [-1, 1] (or [0, 255]), float32 one-hot labels (batch,
        classes))`.

    Example:

    >>> from keras_gmlp.data.image_sources import load_images
    >>> from keras_gmlp.data.images import batches
    >>> data = load_images("digits")
    >>> train = batches(data, "train", 64, (16, 16), training=True)
    >>> images, labels = next(iter(train))
    >>> tuple(images.shape), tuple(labels.shape)
    ((64, 16, 16, 1), (64, 10))
    """
    from keras_gmlp.data.augment import NO_AUGMENTATION
    from keras_gmlp.data.augment import ImageAugmenter
    from keras_gmlp.data.augment import center_crop_resize
    from keras_gmlp.data.augment import random_resized_crop

    image_size = tuple(image_size)
    dataset = data.split(split)
    size = data.size(split)
    if drop_remainder is None:
        drop_remainder = training
    if drop_remainder and size < batch_size:
        raise DataError(
            f"The {split} split of {data.name} has {size} images, fewer "
            f"than one batch of {batch_size}; lower --batch-size."
        )
    if cache is None:
        height, width = data.image_size or (400, 500)
        cache = size * height * width * data.num_channels < CACHE_LIMIT_BYTES
    if cache:
        dataset = dataset.cache()
    augment = augment if training and augment else NO_AUGMENTATION
    augmenter = ImageAugmenter(augment, image_size, data.num_channels, seed)
    if training:
        dataset = dataset.shuffle(
            min(size, shuffle_buffer), seed=seed, reshuffle_each_iteration=True
        )
    fixed_size = data.image_size is not None

    def to_model_size(image, label):
        if fixed_size:
            image = tf.cast(image, tf.float32)
            if tuple(data.image_size) != image_size:
                image = tf.image.resize(image, image_size, method="bilinear")
        elif training and augment.random_resized_crop:
            image = random_resized_crop(image, image_size)
        else:
            image = center_crop_resize(image, image_size)
        image = tf.clip_by_value(tf.cast(image, tf.float32), 0.0, 255.0)
        image.set_shape(image_size + (data.num_channels,))
        return image, tf.one_hot(label, data.num_classes)

    dataset = dataset.map(to_model_size, num_parallel_calls=tf.data.AUTOTUNE)
    if training:
        dataset = dataset.map(
            augmenter.augment_image, num_parallel_calls=tf.data.AUTOTUNE
        )
    dataset = dataset.batch(
        batch_size,
        drop_remainder=drop_remainder,
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    if training:
        dataset = dataset.map(
            augmenter.augment_batch, num_parallel_calls=tf.data.AUTOTUNE
        )
    if normalize:
        dataset = dataset.map(
            lambda images, labels: (normalize_images(images), labels),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
    return dataset.prefetch(tf.data.AUTOTUNE)
