import keras
from keras import ops
from keras_hub.src.models.causal_lm import CausalLM
from keras_hub.src.utils.tensor_utils import any_equal

from keras_gmlp import kernels
from keras_gmlp.models.config import task_optimizer
from keras_gmlp.models.gmlp_text.gmlp_causal_lm_preprocessor import (
    GMLPCausalLMPreprocessor,
)
from keras_gmlp.models.gmlp_text.gmlp_text_backbone import GMLPTextBackbone
from keras_gmlp.models.gmlp_text.gmlp_text_task import GMLPTextTask
from keras_gmlp.models.gmlp_text.text_metrics import LanguageModelLoss
from keras_gmlp.models.gmlp_text.text_metrics import TokenAccuracy


@keras.saving.register_keras_serializable(package="keras_gmlp")
class GMLPCausalLM(GMLPTextTask, CausalLM):
    """A causal (autoregressive) gMLP or aMLP language model.

    A causal `GMLPTextBackbone` (spatial weights `W[i, j] = 0` for `j > i`,
    causal tiny attention) whose final hidden states give next-token
    logits through the transposed token embedding: the logits at position
    `i` depend on tokens `0..i` only and predict token `i + 1`.

    `generate()` takes strings (with a `GMLPCausalLMPreprocessor`) or
    dicts of token ids and runs one of keras-hub's samplers (`"greedy"`,
    `"top_k"`, `"top_p"`, `"beam"` ... chosen in `compile(sampler=...)`),
    compiled on every backend. Decoding is incremental: each block caches
    the normalised gate inputs of its spatial gating unit (and the tiny
    attention its keys and values), so a new token costs `O(tokens)` per
    block instead of a pass over the whole prefix.

    `compile()` defaults to AdamW (learning rate 1e-4, weight decay 0.01
    on every weight but biases and normalisations, global gradient norm
    1) and the next tokens' cross-entropy from logits (keras-hub's
    `SparseCategoricalCrossentropy(from_logits=True)` figure, computed by
    `LanguageModelLoss`) and accuracy, weighted by the padding.

    Args:
        backbone: a causal `keras_gmlp.GMLPTextBackbone`.
        preprocessor: `keras_gmlp.GMLPCausalLMPreprocessor` or `None`.
            Defaults to `None`.
        **kwargs: arguments of `keras_hub.models.Task`, such as `name` or
            `compile=False`.

    Call arguments:
        inputs: dict of `"token_ids"` and `"padding_mask"`, `(batch,
            tokens)`, or token ids alone (the padding mask is
            `token_ids != 0`).

    Returns:
        Next-token logits `(batch, tokens, vocabulary_size)`.

    Example:

    >>> texts = ["the cat sat on the mat.", "the dog sat on the log."]
    >>> tokenizer = keras_gmlp.GMLPTokenizer.from_corpus(texts, 40)
    >>> preprocessor = keras_gmlp.GMLPCausalLMPreprocessor(
    ...     tokenizer, sequence_length=16
    ... )
    >>> backbone = keras_gmlp.GMLPTextBackbone(
    ...     vocabulary_size=tokenizer.vocabulary_size(),
    ...     sequence_length=16,
    ...     num_layers=2,
    ...     hidden_dim=8,
    ...     ffn_dim=16,
    ...     causal=True,
    ... )
    >>> causal_lm = keras_gmlp.GMLPCausalLM(backbone, preprocessor)
    >>> causal_lm.compile(sampler="greedy")
    >>> isinstance(causal_lm.generate("the cat", max_length=8), str)
    True

    References:
        - [Liu et al., 2021](https://arxiv.org/abs/2105.08050)
    """

    backbone_cls = GMLPTextBackbone
    preprocessor_cls = GMLPCausalLMPreprocessor

    def __init__(self, backbone, preprocessor=None, **kwargs):
        if not backbone.causal:
            raise ValueError(
                f"Received a backbone with causal={backbone.causal}; "
                "expected a causal GMLPTextBackbone (causal=True): a "
                "bidirectional model sees the tokens it should predict."
            )
        # === Layers ===
        self.backbone = backbone
        self.preprocessor = preprocessor

        # === Functional Model ===
        inputs = backbone.input
        hidden = backbone(inputs)
        outputs = backbone.token_embedding(hidden, reverse=True)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

    def compile(
        self,
        optimizer="auto",
        loss="auto",
        *,
        weighted_metrics="auto",
        sampler="top_k",
        **kwargs,
    ):
        """Configures the task for training and generation.

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
                `SparseCategoricalAccuracy`, as `keras_gmlp.models.
                gmlp_text.text_metrics.TokenAccuracy`: the same
                values and name, without an `argmax` under JAX) or a list
                of metrics.
            sampler: str or `keras_hub.samplers.Sampler`. The sampler of
                `generate()`. Defaults to `"top_k"`.
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
            sampler=sampler,
            **kwargs,
        )

    def get_compile_config(self):
        config = super().get_compile_config()
        if config:
            config["sampler"] = keras.saving.serialize_keras_object(
                self.sampler
            )
        return config

    def call_with_cache(self, token_ids, cache, cache_update_index):
        """Logits of the positions of `token_ids`, given a decoding cache.

        Incremental decoding: every block caches the normalised gate input
        of its spatial gating unit (and the tiny attention its keys and
        values), so a new token costs `O(max_length)` per block instead of
        a pass over the whole prefix. An operation of `keras_gmlp.kernels`.

        Args:
            token_ids: int tensor `(batch, k)`, the tokens of positions
                `[cache_update_index, cache_update_index + k)`; `k = 1`
                while decoding.
            cache: tuple of one dict of tensors per block, as
                `_build_cache` returns it.
            cache_update_index: int or int scalar tensor.

        Returns:
            `(logits, hidden_states, cache)`: logits `(batch, k,
            vocabulary_size)` predicting the next tokens, hidden states
            `(batch, k, hidden_dim)` and the updated cache.
        """
        return kernels.dispatch(
            "causal_lm_with_cache",
            GMLPCausalLM.reference_call_with_cache,
            self,
            token_ids,
            cache,
            cache_update_index,
        )

    def reference_call_with_cache(self, token_ids, cache, cache_update_index):
        """`call_with_cache` in Keras ops."""
        hidden, cache = self.backbone.call_with_cache(
            token_ids, cache, cache_update_index
        )
        logits = self.backbone.token_embedding(hidden, reverse=True)
        return logits, hidden, cache

    def make_generate_function(self):
        """keras-hub's compiled `generate_step`, through the
        `"generate_function"` operation of `keras_gmlp.kernels`."""
        if self.generate_function is None:
            self.generate_function = kernels.dispatch(
                "generate_function", CausalLM.make_generate_function, self
            )
        return self.generate_function

    def _build_cache(self, token_ids):
        """Runs the prompt buffer `(batch, max_length)` through the causal
        pass and returns its hidden states and the filled cache."""
        batch_size = ops.shape(token_ids)[0]
        max_length = token_ids.shape[1]
        cache = self.backbone.empty_cache(batch_size, max_length)
        _, hidden, cache = self.call_with_cache(token_ids, cache, 0)
        return hidden, cache

    def generate_step(self, inputs, stop_token_ids=None):
        """Generates the tokens after right-padded prompts.

        Args:
            inputs: dict of `"token_ids"` and `"padding_mask"`, `(batch,
                max_length)`: the prompts, padded on the right.
            stop_token_ids: tuple of int, or `None`. A row stops after
                generating one of them.

        Returns:
            A dict of `"token_ids"` and `"padding_mask"`, the mask `False`
            after each row's stop token.
        """
        # The caches are made here and threaded from one step to the next
        # by every keras-hub sampler: this loop owns them.
        with kernels.owned_caches():
            return self._sampled_tokens(inputs, stop_token_ids)

    def _sampled_tokens(self, inputs, stop_token_ids):
        token_ids = ops.convert_to_tensor(inputs["token_ids"], "int32")
        padding_mask = ops.convert_to_tensor(inputs["padding_mask"])
        hidden_states, cache = self._build_cache(token_ids)
        row_lengths = ops.sum(ops.cast(padding_mask, "int32"), axis=-1)
        index = ops.min(row_lengths)

        def next(prompt, cache, index):
            batch_size = ops.shape(prompt)[0]
            position = index - 1
            previous = ops.slice(prompt, [0, position], [batch_size, 1])
            logits, hidden, cache = self.call_with_cache(
                previous, cache, position
            )
            return (
                ops.squeeze(logits, axis=1),
                ops.squeeze(hidden, axis=1),
                cache,
            )

        token_ids = self.sampler(
            next=next,
            prompt=token_ids,
            cache=cache,
            index=index,
            mask=padding_mask,
            stop_token_ids=stop_token_ids,
            hidden_states=hidden_states,
            model=self,
        )
        if stop_token_ids is None:
            padding_mask = ops.ones_like(token_ids, dtype="bool")
        else:
            # Keep each row up to and including its first generated stop
            # token.
            generated = ops.logical_not(ops.cast(padding_mask, "bool"))
            stops = ops.cast(
                any_equal(token_ids, stop_token_ids, generated), "int32"
            )
            stops_before = ops.cumsum(stops, axis=-1) - stops
            padding_mask = ops.equal(stops_before, 0)
        return {"token_ids": token_ids, "padding_mask": padding_mask}
