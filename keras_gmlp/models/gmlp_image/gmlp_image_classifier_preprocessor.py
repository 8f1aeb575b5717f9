import keras
from keras_hub.models import ImageClassifierPreprocessor

from keras_gmlp.models.gmlp_image.gmlp_image_backbone import GMLPImageBackbone
from keras_gmlp.models.gmlp_image.gmlp_image_converter import GMLPImageConverter


@keras.saving.register_keras_serializable(package="keras_gmlp")
class GMLPImageClassifierPreprocessor(ImageClassifierPreprocessor):
    """Preprocessor of `GMLPImageClassifier`: raw images to model inputs.

    Runs its `GMLPImageConverter` on the images and passes labels and
    sample weights through, so `classifier.fit(images, labels)` and
    `classifier.predict(images)` take raw uint8 images, and a `tf.data`
    pipeline can `map` it before the model.

    Args:
        image_converter: `GMLPImageConverter` or `None`. Defaults to
            `None`, no conversion.
        **kwargs: `keras_hub.models.ImageClassifierPreprocessor` arguments.

    Call arguments:
        x: images `(batch, height, width, channels)` or one image.
        y: labels, passed through. Defaults to `None`.
        sample_weight: passed through. Defaults to `None`.

    Example:

    >>> preprocessor = keras_gmlp.models.GMLPImageClassifierPreprocessor(
    ...     keras_gmlp.models.GMLPImageConverter(image_size=(8, 8)))
    >>> images = np.zeros((2, 12, 12, 3), "uint8")
    >>> x, y = preprocessor(images, np.array([0, 1]))
    >>> tuple(x.shape), float(keras.ops.min(x))
    ((2, 8, 8, 3), -1.0)
    """

    backbone_cls = GMLPImageBackbone
    image_converter_cls = GMLPImageConverter
