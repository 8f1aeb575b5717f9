import math

import numpy as np
import pytest
import tensorflow as tf

from keras_gmlp.data.corpus import TextCorpus
from keras_gmlp.data.lm_batches import causal_lm_dataset
from keras_gmlp.data.lm_batches import default_max_predictions
from keras_gmlp.data.lm_batches import fixed_batches
from keras_gmlp.data.lm_batches import masked_lm_dataset
from keras_gmlp.data.lm_batches import masked_lm_heldout_batches
from keras_gmlp.data.lm_batches import pack_sequences
from keras_gmlp.data.lm_batches import packed_sequences
from keras_gmlp.data.lm_batches import token_counts
from keras_gmlp.data.lm_batches import tokenize_records
from keras_gmlp.data.lm_batches import unigram_perplexity
from keras_gmlp.data.vocabulary import special_ids

# tf.data and numpy only: the Keras backend plays no part, so the
# default suite runs these under one backend (`-m large`: every one).
pytestmark = pytest.mark.one_backend("torch")


def test_packing_keeps_every_token_in_order(tokenizer):
    ids = special_ids(tokenizer)
    records = ["the cat sat", "a dog ran in the park", "bird", "red house"]
    stream = tokenize_records(
        tf.data.Dataset.from_tensor_slices(records),
        tokenizer,
        ids["[SEP]"],
        batch_size=3,
    )
    expected = []
    for record in records:
        expected += np.asarray(tokenizer.tokenize(record)).tolist()
        expected.append(ids["[SEP]"])
    sequences = list(
        pack_sequences(
            stream, 6, ids["[CLS]"], ids["[SEP]"]
        ).as_numpy_iterator()
    )
    assert all(s.shape == (6,) for s in sequences)
    assert all(s[0] == ids["[CLS]"] for s in sequences)
    bodies = []
    for sequence in sequences[:-1]:
        assert sequence[-1] == ids["[SEP]"]
        bodies += sequence[1:-1].tolist()
    last = sequences[-1]
    real = last[last != 0]
    assert real[-1] == ids["[SEP]"] and (last[len(real) :] == 0).all()
    bodies += real[1:-1].tolist()
    assert bodies == expected
    assert len(sequences) == math.ceil(len(expected) / 4)


def test_packing_rejects_tiny_lengths(tokenizer):
    empty = tf.data.Dataset.from_tensor_slices(tf.zeros((0, 1), tf.int32))
    with pytest.raises(ValueError, match="sequence_length=2"):
        pack_sequences(empty, 2, 2, 3)


def test_masking_statistics(corpus_dir, tokenizer):
    corpus = TextCorpus(files=str(corpus_dir / "*.txt"))
    ids = special_ids(tokenizer)
    length = 64
    max_predictions = default_max_predictions(length)
    dataset = masked_lm_dataset(
        corpus.dataset("train"), tokenizer, length, batch_size=64
    )
    originals = pack_sequences(
        tokenize_records(corpus.dataset("train"), tokenizer, 3),
        length,
        ids["[CLS]"],
        ids["[SEP]"],
    ).batch(64)
    selected = selectable = as_mask = unchanged = 0
    for (inputs, labels, weights), original in zip(
        dataset.take(4), originals.take(4), strict=True
    ):
        token_ids = inputs["token_ids"].numpy()
        positions = inputs["mask_positions"].numpy()
        labels, weights = labels.numpy(), weights.numpy()
        original = original.numpy()
        assert positions.shape[1] == max_predictions
        # The padding mask of the sequences before masking.
        np.testing.assert_array_equal(
            inputs["padding_mask"].numpy(), original != 0
        )
        # No special token is ever selected ([PAD] [UNK] [CLS] [SEP] [MASK]).
        special = np.isin(original, list(ids.values()))
        selectable += (~special).sum()
        for row in range(len(token_ids)):
            real = weights[row] > 0
            chosen = positions[row][real]
            assert not special[row, chosen].any()
            np.testing.assert_array_equal(
                labels[row][real], original[row, chosen]
            )
            now = token_ids[row, chosen]
            selected += real.sum()
            as_mask += (now == ids["[MASK]"]).sum()
            unchanged += (now == original[row, chosen]).sum()
            untouched = np.ones(length, bool)
            untouched[chosen] = False
            np.testing.assert_array_equal(
                token_ids[row, untouched], original[row, untouched]
            )
    assert selected > 1500
    assert abs(selected / selectable - 0.15) < 0.015
    assert abs(as_mask / selected - 0.8) < 0.04
    assert abs(unchanged / selected - 0.1) < 0.03
    random_share = 1 - (as_mask + unchanged) / selected
    assert abs(random_share - 0.1) < 0.03


def test_causal_batches_shift_by_one(corpus_dir, tokenizer):
    corpus = TextCorpus(
        files=str(corpus_dir / "a.txt"), validation_fraction=0.1
    )
    batches = list(
        causal_lm_dataset(
            corpus.dataset("validation"), tokenizer, 16, 4
        ).as_numpy_iterator()
    )
    for inputs, labels, weights in batches:
        token_ids = inputs["token_ids"]
        assert token_ids.shape[1] == labels.shape[1] == 16
        np.testing.assert_array_equal(token_ids[:, 1:], labels[:, :-1])
        np.testing.assert_array_equal(weights, (labels != 0).astype("f"))
        np.testing.assert_array_equal(inputs["padding_mask"], token_ids != 0)
    assert batches[-1][2].min() == 0  # The last sequence is padded.


def test_fixed_batches_are_cached_and_counted(corpus_dir, tokenizer):
    corpus = TextCorpus(
        files=str(corpus_dir / "*.txt"), validation_fraction=0.1
    )
    batches = fixed_batches(
        masked_lm_dataset(corpus.dataset("validation"), tokenizer, 32, 8),
        max_batches=3,
    )
    assert int(batches.cardinality()) == 3
    first = [b[0]["token_ids"].numpy() for b in batches]
    second = [b[0]["token_ids"].numpy() for b in batches]
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b)
    empty = tf.data.Dataset.from_tensor_slices(tf.zeros((0, 2)))
    with pytest.raises(ValueError, match="no batch"):
        fixed_batches(empty, 3)


def test_unigram_perplexity_against_hand_computation():
    counts = np.array([0.0, 3.0, 1.0, 0.0])
    labels = np.array([[1, 2, 0]])
    weights = np.array([[1.0, 1.0, 0.0]])
    value = unigram_perplexity(counts, [(None, labels, weights)])
    # Add-one over the possible ids 1 and 2: p = 4/6 and 2/6.
    expected = math.exp(-(math.log(4 / 6) + math.log(2 / 6)) / 2)
    assert value == pytest.approx(expected)


def test_token_counts_stop_and_exclude():
    stream = tf.data.Dataset.from_tensor_slices(
        tf.constant([[1, 1, 2], [3, 3, 3], [4, 4, 4]], tf.int32)
    )
    counts = token_counts(stream, 5, max_tokens=6, exclude=[2])
    np.testing.assert_array_equal(counts, [0, 2, 0, 3, 0])


def test_heldout_masks_repeat_with_the_seed(corpus_dir, tokenizer):
    corpus = TextCorpus(
        files=str(corpus_dir / "*.txt"), validation_fraction=0.2
    )

    def heldout(seed):
        batches = masked_lm_heldout_batches(
            corpus.dataset("validation"), tokenizer, 32, 8, 6, seed=seed
        )
        return [
            (x["token_ids"], x["mask_positions"], y, w, x["padding_mask"])
            for x, y, w in batches.as_numpy_iterator()
        ]

    first = heldout(seed=3)
    # The padding mask is that of the sequences before masking.
    originals = packed_sequences(corpus.dataset("validation"), tokenizer, 32)
    for batch, original in zip(first, originals.batch(8), strict=False):
        np.testing.assert_array_equal(batch[4], original.numpy() != 0)
    # Random draws in between (as a model's initialisation) do not matter.
    tf.random.uniform((100,))
    keras_random_draw = tf.random.shuffle(tf.range(10))
    assert keras_random_draw.shape == (10,)
    second = heldout(seed=3)
    other_seed = heldout(seed=4)
    assert len(first) == 6
    for a, b in zip(first, second, strict=True):
        for part_a, part_b in zip(a, b, strict=True):
            np.testing.assert_array_equal(part_a, part_b)
    # The same sequences, other masks.
    np.testing.assert_array_equal(first[0][2].shape, other_seed[0][2].shape)
    assert any(
        not np.array_equal(a[1], b[1])
        for a, b in zip(first, other_seed, strict=True)
    )
    # 15 % of the maskable tokens (not [CLS] or [SEP]) are predicted, and
    # 80 % of those are shown as [MASK].
    weights = sum(batch[3].sum() for batch in first)
    tokens = sum(batch[0].size - 2 * len(batch[0]) for batch in first)
    assert 0.14 < weights / tokens < 0.2
    mask_id = tokenizer.token_to_id("[MASK]")
    shown = np.concatenate(
        [
            np.take_along_axis(ids, positions, axis=1)[weights_ > 0]
            for ids, positions, _, weights_, _ in first
        ]
    )
    assert 0.7 < np.mean(shown == mask_id) < 0.9
    with pytest.raises(ValueError, match="no batch"):
        masked_lm_heldout_batches(
            corpus.dataset("validation").take(0), tokenizer, 32, 8, 6
        )
