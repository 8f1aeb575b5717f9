"""Image augmentation inside tf.data: crops, flips and Keras 3's layers.

The paper's recipe: RandAugment (for its AutoAugment), MixUp (alpha 0.8)
or CutMix (alpha 1.0) per batch with switch probability 0.5, label
smoothing 0.1 (in the loss), optional random erasing. RandAugment, MixUp,
CutMix and RandomErasing are Keras 3's own layers, run in the tf.data
graph on every backend.
"""

import dataclasses

import keras
import tensorflow as tf


@dataclasses.dataclass
class AugmentConfig:
    """What the training pipeline does to images.

    Attributes:
        flip: bool. Random horizontal flips.
        crop_padding: int. Pixels of reflection padding before a random crop
            back to size (CIFAR style); 0 disables it. Used for datasets of
            fixed-size images.
        random_resized_crop: bool. Inception-style random-resized crops
            (ImageNet style), for datasets of varying image sizes.
        translate: float. Random translation as a fraction of the size; 0
            disables it.
        randaugment_ops: int. RandAugment operations per image; 0 disables
            RandAugment.
        randaugment_magnitude: float. RandAugment's `factor` in [0, 1].
        mixup: float. MixUp's alpha; 0 disables MixUp.
        cutmix: float. CutMix's alpha; 0 disables CutMix.
        switch_probability: float. Chance of CutMix rather than MixUp for a
            batch when both are on.
        random_erasing: float. Probability of random erasing per image.
    """

    flip: bool = True
    crop_padding: int = 0
    random_resized_crop: bool = False
    translate: float = 0.0
    randaugment_ops: int = 2
    randaugment_magnitude: float = 0.5
    mixup: float = 0.8
    cutmix: float = 1.0
    switch_probability: float = 0.5
    random_erasing: float = 0.0

    def __post_init__(self):
        for field in ("randaugment_magnitude", "switch_probability"):
            value = getattr(self, field)
            if not 0 <= value <= 1:
                raise ValueError(f"{field} must be in [0, 1], got {value}.")
        if not 0 <= self.random_erasing <= 1:
            raise ValueError(
                f"random_erasing must be in [0, 1], got {self.random_erasing}."
            )
        for field in ("crop_padding", "randaugment_ops", "mixup", "cutmix"):
            if getattr(self, field) < 0:
                raise ValueError(
                    f"{field} must be >= 0, got {getattr(self, field)}."
                )

    @property
    def mixes(self):
        """Whether batches are mixed (MixUp or CutMix)."""
        return self.mixup > 0 or self.cutmix > 0


NO_AUGMENTATION = AugmentConfig(
    flip=False, randaugment_ops=0, mixup=0.0, cutmix=0.0
)


class ImageAugmenter:
    """Per-image and per-batch augmentation functions for tf.data `map`.

    Args:
        config: `AugmentConfig`.
        image_size: `(height, width)` of the model's input.
        num_channels: int. Image channels; RandAugment needs 3.
        seed: int or `None`. Seed of the random layers.

    Example:

    >>> import tensorflow as tf
    >>> from keras_gmlp.data.augment import AugmentConfig, ImageAugmenter
    >>> config = AugmentConfig(crop_padding=4, randaugment_ops=0, cutmix=0.0)
    >>> augmenter = ImageAugmenter(config, (32, 32), 3, seed=0)
    >>> images = np.random.default_rng(0).uniform(0, 255, (8, 32, 32, 3))
    >>> labels = np.eye(10, dtype="float32")[np.arange(8)]  # one-hot
    >>> dataset = tf.data.Dataset.from_tensor_slices(
    ...     (images.astype("float32"), labels))
    >>> dataset = dataset.map(augmenter.augment_image)  # float 0..255
    >>> dataset = dataset.batch(4).map(augmenter.augment_batch)
    >>> [tuple(x.shape) for x in next(iter(dataset))]
    [(4, 32, 32, 3), (4, 10)]
    """

    def __init__(self, config, image_size, num_channels=3, seed=None):
        self.config = config
        self.image_size = tuple(image_size)
        self.seed = seed
        self.randaugment = None
        if config.randaugment_ops and num_channels == 3:
            self.randaugment = keras.layers.RandAugment(
                value_range=(0, 255),
                num_ops=config.randaugment_ops,
                factor=config.randaugment_magnitude,
                seed=seed,
            )
        self.translation = None
        if config.translate:
            self.translation = keras.layers.RandomTranslation(
                config.translate, config.translate, seed=seed
            )
        self.mixup = keras.layers.MixUp(config.mixup, seed=seed)
        self.cutmix = keras.layers.CutMix(config.cutmix, seed=seed)
        self.erasing = None
        if config.random_erasing:
            self.erasing = keras.layers.RandomErasing(
                factor=config.random_erasing, value_range=(0, 255), seed=seed
            )

    def augment_image(self, image, label):
        """Random geometry and RandAugment of one float image in [0, 255]."""
        config = self.config
        if config.crop_padding:
            image = pad_and_random_crop(
                image, self.image_size, config.crop_padding
            )
        if config.flip:
            image = tf.image.random_flip_left_right(image)
        if self.translation is not None:
            image = self.translation(image)
        if self.randaugment is not None:
            image = self.randaugment(image)
        return image, label

    def augment_batch(self, images, labels):
        """MixUp or CutMix and random erasing of a batch, one-hot labels."""
        config = self.config
        if self.erasing is not None:
            images = self.erasing(images)
        if not config.mixes:
            return images, labels
        batch = {"images": images, "labels": labels}

        def mix(layer):
            mixed = layer(batch)
            return mixed["images"], tf.cast(mixed["labels"], labels.dtype)

        if config.mixup and config.cutmix:
            use_cutmix = tf.random.uniform([]) < config.switch_probability
            return tf.cond(
                use_cutmix,
                lambda: mix(self.cutmix),
                lambda: mix(self.mixup),
            )
        return mix(self.cutmix if config.cutmix else self.mixup)


def pad_and_random_crop(image, size, padding):
    """Reflection-pads `image` by `padding` pixels and crops `size` back."""
    padded = tf.pad(
        image, [[padding, padding], [padding, padding], [0, 0]], "REFLECT"
    )
    channels = tf.shape(image)[-1]
    return tf.image.random_crop(padded, (size[0], size[1], channels))


def random_resized_crop(image, size, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    """An Inception-style random crop of `image`, resized to `size`."""
    begin, crop_size, _ = tf.image.sample_distorted_bounding_box(
        tf.shape(image),
        bounding_boxes=tf.zeros((1, 0, 4)),
        min_object_covered=0.0,
        aspect_ratio_range=ratio,
        area_range=scale,
        max_attempts=10,
        use_image_if_no_bounding_boxes=True,
    )
    crop = tf.slice(image, begin, crop_size)
    return tf.image.resize(crop, size, method="bicubic", antialias=True)


def center_crop_resize(image, size, crop_fraction=0.875):
    """The central `crop_fraction` of `image`, resized to `size` (eval)."""
    shape = tf.cast(tf.shape(image)[:2], tf.float32)
    side = tf.reduce_min(shape) * crop_fraction
    top = tf.cast((shape[0] - side) / 2, tf.int32)
    left = tf.cast((shape[1] - side) / 2, tf.int32)
    side = tf.cast(side, tf.int32)
    crop = image[top : top + side, left : left + side]
    return tf.image.resize(crop, size, method="bicubic", antialias=True)
