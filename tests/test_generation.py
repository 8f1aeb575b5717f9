import keras
import numpy as np
import pytest

from keras_gmlp.generation import generate
from keras_gmlp.generation import model_sequence_length
from keras_gmlp.models import causal_lm
from keras_gmlp.models import masked_lm
from tests.backends import in_turn

TINY = dict(
    vocabulary_size=23,
    sequence_length=12,
    num_layers=2,
    hidden_dim=8,
    ffn_dim=16,
)


def randomized(model, seed=0):
    """Gives every weight a random value, the spatial ones included.

    A fresh model's spatial weights are near zero, which would hide a
    leak of the future through them.
    """
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        shape = tuple(variable.shape)
        variable.assign(rng.normal(0.0, 0.5, shape).astype("float32"))
    return model


@pytest.fixture(
    scope="module",
    params=in_turn(
        [
            dict(spatial="dense"),
            dict(spatial="toeplitz"),
            dict(spatial="dense", attention_dim=4),
        ],
        ids=["dense", "toeplitz", "amlp"],
    ),
)
def model(request):
    return randomized(causal_lm(**TINY, **request.param))


def test_no_future_token_leaks(model, rng):
    tokens = rng.integers(1, 23, size=(3, 12)).astype("int32")
    logits = keras.ops.convert_to_numpy(model(tokens))
    for position in (0, 5, 11):
        changed = tokens.copy()
        changed[:, position] = (changed[:, position] % 22) + 1
        new = keras.ops.convert_to_numpy(model(changed))
        np.testing.assert_allclose(
            new[:, :position], logits[:, :position], atol=1e-5
        )
        # The changed token does move its own and later outputs: the
        # comparison above can fail.
        assert np.abs(new[:, position:] - logits[:, position:]).max() > 1e-3


def test_masked_lm_does_see_the_future(rng):
    model = randomized(masked_lm(**TINY, spatial="dense"))
    tokens = rng.integers(1, 23, size=(2, 12)).astype("int32")
    changed = tokens.copy()
    changed[:, 8] = (changed[:, 8] % 22) + 1
    before = keras.ops.convert_to_numpy(model(tokens))[:, :8]
    after = keras.ops.convert_to_numpy(model(changed))[:, :8]
    assert np.abs(before - after).max() > 1e-3


def test_greedy_matches_a_prefix_by_prefix_reference(model, rng):
    prompt = rng.integers(1, 23, size=(2, 3)).astype("int32")
    generated = generate(model, prompt, max_new_tokens=6)
    assert generated.shape == (2, 9)
    np.testing.assert_array_equal(generated[:, :3], prompt)
    # Reference: run the model on the growing prefix only, no padding.
    reference = prompt.copy()
    for _ in range(6):
        logits = keras.ops.convert_to_numpy(model(reference))
        reference = np.concatenate(
            [reference, logits[:, -1].argmax(-1)[:, None]], axis=1
        ).astype("int32")
    np.testing.assert_array_equal(generated, reference)


def test_one_dimensional_prompt(model):
    generated = generate(model, [5, 7], max_new_tokens=3)
    assert generated.shape == (5,)
    batched = generate(model, [[5, 7]], max_new_tokens=3)
    np.testing.assert_array_equal(generated, batched[0])


def test_top_k_samples_among_the_k_best(model, rng):
    prompt = rng.integers(1, 23, size=(4, 2)).astype("int32")
    first = generate(
        model, prompt, max_new_tokens=1, strategy="top_k", top_k=3, seed=1
    )
    logits = keras.ops.convert_to_numpy(model(prompt))[:, -1]
    best = np.argsort(-logits, axis=-1)[:, :3]
    for row in range(4):
        assert first[row, 2] in best[row]
    samples = {
        int(
            generate(
                model, prompt[:1], 1, strategy="top_k", top_k=3, seed=seed
            )[0, 2]
        )
        for seed in range(30)
    }
    assert 1 < len(samples) <= 3
    assert samples <= set(best[0].tolist())
    again = generate(
        model, prompt, max_new_tokens=1, strategy="top_k", top_k=3, seed=1
    )
    np.testing.assert_array_equal(first, again)


def test_top_1_is_greedy(model, rng):
    prompt = rng.integers(1, 23, size=(2, 4)).astype("int32")
    np.testing.assert_array_equal(
        generate(model, prompt, 4, strategy="top_k", top_k=1, seed=0),
        generate(model, prompt, 4),
    )


def test_end_token_stops_a_sequence(model):
    greedy = generate(model, [3, 4], max_new_tokens=5)
    end = int(greedy[2])
    stopped = generate(model, [3, 4], max_new_tokens=5, end_token_id=end)
    assert stopped[2] == end
    assert (stopped[3:] == 0).all()


def test_bad_arguments_fail_clearly(model):
    assert model_sequence_length(model) == 12
    with pytest.raises(ValueError, match="makes 13 tokens.*at most 12"):
        generate(model, [1, 2, 3], max_new_tokens=10)
    with pytest.raises(ValueError, match="strategy='beam'"):
        generate(model, [1], 2, strategy="beam")
    with pytest.raises(ValueError, match="top_k=0"):
        generate(model, [1], 2, strategy="top_k", top_k=0)
    with pytest.raises(ValueError, match="temperature=0"):
        generate(model, [1], 2, temperature=0)
    with pytest.raises(ValueError, match="shape \\(1, 0\\)"):
        generate(model, [[]], 2)
    with pytest.raises(ValueError, match="not a causal"):
        generate(masked_lm(**TINY), [1, 2], 2)


def test_left_padded_prompts_generate_as_unpadded(model, rng):
    # Prompts of 1, 2 and 4 tokens, padded on the left to 4 with [PAD] = 0.
    prompts = [rng.integers(1, 23, size=n).astype("int32") for n in (4, 1, 2)]
    batch = np.zeros((3, 4), "int32")
    for row, prompt in enumerate(prompts):
        batch[row, 4 - len(prompt) :] = prompt
    generated = generate(model, batch, max_new_tokens=5)
    # The caller's layout: the padded prompt, then the new tokens.
    assert generated.shape == (3, 9)
    np.testing.assert_array_equal(generated[:, :4], batch)
    for row, prompt in enumerate(prompts):
        alone = generate(model, prompt, max_new_tokens=5)
        np.testing.assert_array_equal(generated[row, 4:], alone[len(prompt) :])


def test_left_padded_top_k_matches_unpadded_sampling(model, rng):
    prompt = rng.integers(1, 23, size=2).astype("int32")
    padded = np.concatenate([[0, 0], prompt]).astype("int32")
    sampled = generate(model, padded, 4, strategy="top_k", top_k=3, seed=5)
    alone = generate(model, prompt, 4, strategy="top_k", top_k=3, seed=5)
    np.testing.assert_array_equal(sampled[2:], alone)


def test_a_prompt_of_padding_only_is_refused(model):
    with pytest.raises(ValueError, match="row 1.*only padding"):
        generate(model, [[3, 4], [0, 0]], max_new_tokens=2)
