import keras
from keras_hub.models import ImageClassifier
from keras_hub.models import Task

from keras_gmlp.models.gmlp_image.gmlp_image_backbone import GMLPImageBackbone
from keras_gmlp.models.gmlp_image.gmlp_image_classifier_preprocessor import (
    GMLPImageClassifierPreprocessor,
)
from keras_gmlp.models.gmlp_task import GMLPTask
from keras_gmlp.optimizers import adamw


@keras.saving.register_keras_serializable(package="keras_gmlp")
class GMLPImageClassifier(GMLPTask, ImageClassifier):
    """gMLP image classification task: images in, class logits out.

    The `GMLPImageBackbone`'s token features (its `"sequence_output"`
    when it pools too) are pooled over the tokens
    (their mean, as the paper's and timm's models), passed through an
    optional dropout and a Dense layer named `head`. With a
    `preprocessor`, `fit()`, `predict()` and `evaluate()` take raw images
    (uint8 or float pixels in [0, 255]) of any size; without one the
    inputs are the backbone's: images of its size scaled to [-1, 1].

    `compile()` defaults to AdamW (learning rate 1e-3, weight decay 0.05
    except biases and norms, gradient clipping 1.0: the paper's ImageNet
    peak), sparse categorical cross-entropy and accuracy.

    The backbone's layers (`stem`, `block_{i}`, `final_norm`) are found by
    `get_layer` too, as in the flat models of earlier versions.

    Args:
        backbone: `GMLPImageBackbone`. The feature extractor.
        num_classes: int. Number of classes.
        preprocessor: `GMLPImageClassifierPreprocessor` or `None`. Applied
            to the inputs of `fit()`, `predict()` and `evaluate()`.
            Defaults to `None`.
        pooling: str. `"avg"` (mean over the tokens) or `"max"`. Defaults
            to `"avg"`.
        activation: `None`, str or callable. Activation of the head;
            `None` returns logits. Defaults to `None`.
        dropout: float. Dropout rate before the head. Defaults to `0.0`.
        head_dtype: `None`, str or `keras.DTypePolicy`. Dtype policy of
            the pooling and the head. Defaults to `None`, the backbone's.
        **kwargs: `keras_hub.models.Task` arguments, such as `name` and
            `compile`.

    Call arguments:
        images: tensor `(batch, height, width, channels)` of the backbone's
            size, scaled to [-1, 1] (what the preprocessor makes).

    Example:

    Train on raw uint8 images with the preprocessor attached:

    >>> backbone = keras_gmlp.models.GMLPImageBackbone(
    ...     image_size=16, patch_size=4, num_layers=2, hidden_dim=16,
    ...     ffn_dim=32)
    >>> preprocessor = keras_gmlp.models.GMLPImageClassifierPreprocessor(
    ...     keras_gmlp.models.GMLPImageConverter(image_size=(16, 16)))
    >>> classifier = keras_gmlp.models.GMLPImageClassifier(
    ...     backbone=backbone, num_classes=4, preprocessor=preprocessor)
    >>> images = np.random.randint(0, 256, (8, 20, 20, 3), dtype="uint8")
    >>> labels = np.arange(8) % 4
    >>> history = classifier.fit(images, labels, batch_size=4, verbose=0)
    >>> classifier.predict(images, verbose=0).shape
    (8, 4)

    A paper configuration by name (random weights), with a preprocessor:

    >>> classifier = keras_gmlp.models.GMLPImageClassifier.from_preset(
    ...     "gmlp_micro4_32", num_classes=10)
    >>> classifier.backbone.num_layers
    6

    References:
        - [Liu et al., 2021](https://arxiv.org/abs/2105.08050)
    """

    backbone_cls = GMLPImageBackbone
    preprocessor_cls = GMLPImageClassifierPreprocessor

    def __init__(
        self,
        backbone,
        num_classes,
        preprocessor=None,
        pooling="avg",
        activation=None,
        dropout=0.0,
        head_dtype=None,
        **kwargs,
    ):
        policy = head_dtype or backbone.dtype_policy

        # === Layers ===
        self.backbone = backbone
        self.preprocessor = preprocessor
        if pooling == "avg":
            self.pooler = keras.layers.GlobalAveragePooling1D(
                dtype=policy, name="pooler"
            )
        elif pooling == "max":
            self.pooler = keras.layers.GlobalMaxPooling1D(
                dtype=policy, name="pooler"
            )
        else:
            raise ValueError(
                f"Received pooling={pooling!r}; expected 'avg' (the mean "
                "over tokens) or 'max'."
            )
        self.output_dropout = keras.layers.Dropout(
            dropout, dtype=policy, name="output_dropout"
        )
        self.output_dense = keras.layers.Dense(
            num_classes, activation=activation, dtype=policy, name="head"
        )

        # === Functional Model ===
        inputs = self.backbone.input
        x = self.backbone(inputs)
        if isinstance(x, dict):  # a backbone with its own pooling
            x = x["sequence_output"]
        x = self.pooler(x)
        x = self.output_dropout(x)
        outputs = self.output_dense(x)
        # The parent builds a 2-D pooling over image feature maps; the
        # backbone gives tokens, so build the task graph here. Compile once
        # the configuration is set: the loss depends on the activation.
        compile = kwargs.pop("compile", True)
        Task.__init__(
            self, inputs=inputs, outputs=outputs, compile=False, **kwargs
        )

        # === Config ===
        self.num_classes = num_classes
        self.pooling = pooling
        self.activation = activation
        self.dropout = dropout
        self.head_dtype = head_dtype
        if compile:
            self.compile()

    def get_config(self):
        config = super().get_config()
        head_dtype = self.head_dtype
        if isinstance(head_dtype, keras.DTypePolicy):
            head_dtype = keras.dtype_policies.serialize(head_dtype)
        config["head_dtype"] = head_dtype
        return config

    def compile(
        self, optimizer="auto", loss="auto", *, metrics="auto", **kwargs
    ):
        """Configures the task for training.

        Args:
            optimizer: `"auto"` or a `keras.Optimizer`. `"auto"` is AdamW,
                learning rate 1e-3, weight decay 0.05 (not on biases and
                norms), gradient clipping 1.0.
            loss: `"auto"` or a loss. `"auto"` is sparse categorical
                cross-entropy, from logits unless the head has a softmax.
            metrics: `"auto"` or a list of metrics. `"auto"` is sparse
                categorical accuracy named `accuracy`.
            **kwargs: `keras.Model.compile` arguments.
        """
        if optimizer == "auto":
            optimizer = adamw(1e-3, weight_decay=0.05, model=self)
        if loss == "auto":
            activation = keras.activations.get(self.activation)
            from_logits = activation != keras.activations.softmax
            loss = keras.losses.SparseCategoricalCrossentropy(from_logits)
        if metrics == "auto":
            metrics = [keras.metrics.SparseCategoricalAccuracy("accuracy")]
        # Skip the parent's defaults, which differ (and so GMLPTask's
        # compile: the requested jit_compile is kept here).
        jit_compile = kwargs.pop("jit_compile", "auto")
        Task.compile(
            self,
            optimizer=optimizer,
            loss=loss,
            metrics=metrics,
            jit_compile=jit_compile,
            **kwargs,
        )
        self._jit_compile_requested = jit_compile
