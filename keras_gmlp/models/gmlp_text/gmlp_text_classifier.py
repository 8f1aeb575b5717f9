import keras
from keras_hub.src.models.text_classifier import TextClassifier

from keras_gmlp.models.config import task_optimizer
from keras_gmlp.models.gmlp_text.gmlp_text_backbone import GMLPTextBackbone
from keras_gmlp.models.gmlp_text.gmlp_text_classifier_preprocessor import (
    GMLPTextClassifierPreprocessor,
)
from keras_gmlp.models.gmlp_text.gmlp_text_task import GMLPTextTask
from keras_gmlp.models.gmlp_text.last_token_pooling import LastTokenPooling


@keras.saving.register_keras_serializable(package="keras_gmlp")
class GMLPTextClassifier(GMLPTextTask, TextClassifier):
    """A gMLP (or aMLP) text classifier.

    Pools one token of the backbone's final hidden states, applies dropout
    and a dense layer (`head`) to `num_classes` logits. A bidirectional backbone
    pools the first token (`[CLS]`), as the paper and BERT do. A causal
    backbone pools the last real token of each row (the final `[SEP]` of
    the packed text), the only one that has seen the whole text, as GPT
    classifiers do (`keras_gmlp.models.LastTokenPooling`).

    With a `GMLPTextClassifierPreprocessor` attached, `fit()`,
    `evaluate()` and `predict()` take raw strings (or pairs). `compile()`
    defaults to AdamW (learning rate 5e-5, weight decay 0.01 on every
    weight but biases and normalisations, global gradient norm 1),
    `SparseCategoricalCrossentropy(from_logits=True)` and accuracy.

    Args:
        backbone: `keras_gmlp.GMLPTextBackbone`.
        num_classes: int. Number of classes.
        preprocessor: `keras_gmlp.GMLPTextClassifierPreprocessor` or
            `None`. Defaults to `None`.
        dropout: float. Dropout rate before the head. Defaults to `0.1`.
        **kwargs: arguments of `keras_hub.models.Task`, such as `name` or
            `compile=False`.

    Call arguments:
        inputs: dict of `"token_ids"` and `"padding_mask"`, `(batch,
            tokens)`, or token ids alone (the padding mask is
            `token_ids != 0`).

    Returns:
        Logits `(batch, num_classes)`.

    Example:

    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    >>> vocabulary += ["good", "bad", "film", "."]
    >>> preprocessor = keras_gmlp.GMLPTextClassifierPreprocessor(
    ...     keras_gmlp.GMLPTokenizer(vocabulary=vocabulary),
    ...     sequence_length=8,
    ... )
    >>> backbone = keras_gmlp.GMLPTextBackbone(
    ...     vocabulary_size=len(vocabulary),
    ...     sequence_length=8,
    ...     num_layers=2,
    ...     hidden_dim=8,
    ...     ffn_dim=16,
    ... )
    >>> classifier = keras_gmlp.GMLPTextClassifier(
    ...     backbone, num_classes=2, preprocessor=preprocessor
    ... )
    >>> history = classifier.fit(
    ...     ["good film.", "bad film."], [1, 0], batch_size=2, verbose=0
    ... )
    >>> classifier.predict(["good film."], verbose=0).shape
    (1, 2)

    References:
        - [Liu et al., 2021](https://arxiv.org/abs/2105.08050)
    """

    backbone_cls = GMLPTextBackbone
    preprocessor_cls = GMLPTextClassifierPreprocessor

    def __init__(
        self,
        backbone,
        num_classes,
        preprocessor=None,
        dropout=0.1,
        **kwargs,
    ):
        # === Layers ===
        self.backbone = backbone
        self.preprocessor = preprocessor
        self.pooling = None
        if backbone.causal:
            # The padding mask is 0 at padding: it marks the real tokens
            # as token ids would.
            self.pooling = LastTokenPooling(
                padding_id=0, dtype=backbone.dtype_policy, name="pooling"
            )
        self.output_dropout = keras.layers.Dropout(
            dropout, dtype=backbone.dtype_policy, name="output_dropout"
        )
        self.output_dense = keras.layers.Dense(
            num_classes, dtype=backbone.dtype_policy, name="head"
        )

        # === Functional Model ===
        inputs = backbone.input
        hidden = backbone(inputs)
        if self.pooling is not None:
            pooled = self.pooling(hidden, inputs["padding_mask"])
        else:
            pooled = hidden[:, 0, :]
        outputs = self.output_dense(self.output_dropout(pooled))
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

        # === Config ===
        self.num_classes = num_classes
        self.dropout = dropout

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_classes": self.num_classes,
                "dropout": self.dropout,
            }
        )
        return config

    def compile(
        self,
        optimizer="auto",
        loss="auto",
        *,
        metrics="auto",
        **kwargs,
    ):
        """Configures the task for training.

        Args:
            optimizer: `"auto"` (AdamW, learning rate 5e-5, see the class
                docstring), or any Keras optimizer.
            loss: `"auto"` (`SparseCategoricalCrossentropy(from_logits=
                True)`) or any Keras loss.
            metrics: `"auto"` (`SparseCategoricalAccuracy`) or a list of
                metrics.
            **kwargs: arguments of `keras.Model.compile`.
        """
        if optimizer == "auto":
            optimizer = task_optimizer(5e-5)
        super().compile(
            optimizer=optimizer, loss=loss, metrics=metrics, **kwargs
        )
