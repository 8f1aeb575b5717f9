import keras
from keras import ops
from keras_hub.src.models.masked_lm import MaskedLM

from keras_gmlp.models.config import task_optimizer
from keras_gmlp.models.gmlp_text.gmlp_masked_lm_preprocessor import (
    GMLPMaskedLMPreprocessor,
)
from keras_gmlp.models.gmlp_text.gmlp_text_backbone import GMLPTextBackbone
from keras_gmlp.models.gmlp_text.gmlp_text_task import GMLPTextTask
from keras_gmlp.models.gmlp_text.text_metrics import LanguageModelLoss
from keras_gmlp.models.gmlp_text.text_metrics import TokenAccuracy


@keras.saving.register_keras_serializable(package="keras_gmlp")
class GMLPMaskedLM(GMLPTextTask, MaskedLM):
    """A gMLP (or aMLP) masked language model.

    Predicts the tokens at `mask_positions` from the backbone's final
    hidden states through the transposed token embedding, as the paper
    (and BERT's tied output layer) does: the task adds no weights to its
    `GMLPTextBackbone`, so the paper's parameter counts hold exactly.

    With a `GMLPMaskedLMPreprocessor` attached, `fit()`, `evaluate()` and
    `predict()` take raw strings. `compile()` defaults to AdamW (learning
    rate 1e-4, weight decay 0.01 on every weight but biases and
    normalisations, global gradient norm 1), the masked tokens'
    cross-entropy from logits (keras-hub's
    `SparseCategoricalCrossentropy(from_logits=True)` figure, computed by
    `LanguageModelLoss`) and their accuracy, both weighted by the
    preprocessor's sample weights.

    Args:
        backbone: `keras_gmlp.GMLPTextBackbone`.
        preprocessor: `keras_gmlp.GMLPMaskedLMPreprocessor` or `None`, for
            inputs that are already preprocessed. Defaults to `None`.
        **kwargs: arguments of `keras_hub.models.Task`, such as `name` or
            `compile=False`.

    Call arguments:
        inputs: dict of `"token_ids"` and `"padding_mask"` `(batch,
            tokens)` and `"mask_positions"`, int `(batch, masks)`; or
            token ids alone (the padding mask is `token_ids != 0`).
            Without `"mask_positions"`, every position is predicted.

    Returns:
        Logits `(batch, masks, vocabulary_size)`.

    Example:

    >>> texts = ["the quick brown fox jumped.", "the lazy dog slept."]
    >>> tokenizer = keras_gmlp.GMLPTokenizer.from_corpus(texts, 40)
    >>> preprocessor = keras_gmlp.GMLPMaskedLMPreprocessor(
    ...     tokenizer, sequence_length=16, mask_selection_length=4
    ... )
    >>> backbone = keras_gmlp.GMLPTextBackbone(
    ...     vocabulary_size=tokenizer.vocabulary_size(),
    ...     sequence_length=16,
    ...     num_layers=2,
    ...     hidden_dim=8,
    ...     ffn_dim=16,
    ... )
    >>> masked_lm = keras_gmlp.GMLPMaskedLM(backbone, preprocessor)
    >>> history = masked_lm.fit(texts, batch_size=2, verbose=0)
    >>> keras_gmlp.GMLPMaskedLM.from_preset("gmlp_tiny").count_params()
    1449212

    References:
        - [Liu et al., 2021](https://arxiv.org/abs/2105.08050)
    """

    backbone_cls = GMLPTextBackbone
    preprocessor_cls = GMLPMaskedLMPreprocessor

    def __init__(self, backbone, preprocessor=None, **kwargs):
        # === Layers ===
        self.backbone = backbone
        self.preprocessor = preprocessor

        # === Functional Model ===
        inputs = {
            **backbone.input,
            "mask_positions": keras.Input(
                shape=(None,), dtype="int32", name="mask_positions"
            ),
        }
        hidden = backbone(backbone.input)
        positions = ops.expand_dims(inputs["mask_positions"], axis=-1)
        hidden = ops.take_along_axis(hidden, positions, axis=1)
        outputs = backbone.token_embedding(hidden, reverse=True)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

    def token_inputs(self, inputs):
        inputs = super().token_inputs(inputs)
        if (
            isinstance(inputs, dict)
            and "token_ids" in inputs
            and "mask_positions" not in inputs
        ):
            ones = ops.ones_like(inputs["token_ids"], dtype="int32")
            inputs = dict(inputs, mask_positions=ops.cumsum(ones, axis=1) - 1)
        return inputs

    def compile(
        self,
        optimizer="auto",
        loss="auto",
        *,
        weighted_metrics="auto",
        **kwargs,
    ):
        """Configures the task for training.

        Args:
            optimizer: `"auto"` (AdamW, learning rate 1e-4, see the class
                docstring), or any Keras optimizer.
            loss: `"auto"` or any Keras loss. `"auto"` is keras-hub's
                loss (the token cross-entropy of the logits averaged over
                every position, `sum_over_batch_size`), computed as
                `LanguageModelLoss` does on logits flattened to
                `(tokens, vocabulary)`: the same values, without torch's
                strided copies of the logits.
            weighted_metrics: `"auto"` (keras-hub's
                `SparseCategoricalAccuracy`, weighted by the mask weights,
                as `keras_gmlp.models.gmlp_text.text_metrics.TokenAccuracy`: the
                same values and name, without an `argmax` under JAX) or a
                list of metrics.
            **kwargs: arguments of `keras.Model.compile`.
        """
        if optimizer == "auto":
            optimizer = task_optimizer(1e-4)
        if loss == "auto":
            loss = LanguageModelLoss(reduction="sum_over_batch_size")
        if weighted_metrics == "auto":
            weighted_metrics = [
                TokenAccuracy(name="sparse_categorical_accuracy")
            ]
        super().compile(
            optimizer=optimizer,
            loss=loss,
            weighted_metrics=weighted_metrics,
            **kwargs,
        )
