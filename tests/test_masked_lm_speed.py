"""The masked-LM speed benchmark (`benchmarks/masked_lm_speed.py`) times
the gMLP and its matched BERT through the same training step."""

import pytest

from benchmarks import masked_lm_speed


def trained_metric_names(name):
    model, _ = masked_lm_speed.build(name, "gmlp_tiny", 16, 64)
    x, y = masked_lm_speed.batch(model, 16, 2, 64)
    logs = model.train_on_batch(x, y, return_dict=True)
    return sorted(logs)


# The metrics a step reports do not depend on the backend.
@pytest.mark.one_backend("torch")
def test_every_model_trains_with_the_same_loss_and_metrics():
    # GMLPMaskedLM.compile adds keras-hub's accuracy unless told otherwise,
    # a plain compile does not: one model would pay for an argmax over the
    # vocabulary in every timed step and the other would not.
    gmlp = trained_metric_names("gmlp")
    assert gmlp == trained_metric_names("bert")
    assert "masked_accuracy" in gmlp and "perplexity" in gmlp


@pytest.mark.one_backend("torch")
@pytest.mark.parametrize("name", ["gmlp", "bert"])
def test_every_model_trains_with_the_recipe_optimizer(name):
    # As the pretraining job compiles it, not Keras' AdamW: the fused AdamW
    # (torch's fused kernel under torch), global-norm clipping and the
    # biases and normalisation variables exempt from weight decay.
    from keras_gmlp.kernels.fused_adamw import FusedAdamW

    config = masked_lm_speed.recipe_config("gmlp_tiny", 16, [])
    model, _ = masked_lm_speed.build(name, "gmlp_tiny", 16, 64)
    optimizer = model.optimizer
    assert isinstance(optimizer, FusedAdamW)
    assert optimizer.global_clipnorm == config.clipnorm
    assert optimizer.weight_decay == config.weight_decay
    assert optimizer.epsilon == 1e-6
    biases = [v for v in model.trainable_variables if v.name == "bias"]
    assert biases and not any(map(optimizer._use_weight_decay, biases))


@pytest.mark.one_backend("torch")
def test_the_bert_is_matched_at_every_length(monkeypatch):
    """BERT's parameters grow with n (its position embedding, n x hidden):
    a BERT matched once at the first length and kept has about 3 % more
    than the gMLP at n = 512 and 15 % more at 2048 (hidden 128). Each
    length's BERT is matched to that length's gMLP."""
    written = {}
    monkeypatch.setattr(
        masked_lm_speed.common,
        "write_results",
        lambda name, report: written.setdefault("report", report),
    )
    argv = ["--lengths", "16", "512", "--models", "gmlp", "bert"]
    argv += ["--vocabulary-size", "256", "--batch-tokens", "512"]
    argv += ["--rounds", "1", "--target-seconds", "0.01"]
    masked_lm_speed.main(argv)
    rows = written["report"]["rows"]
    assert [row["tokens"] for row in rows] == [16, 16, 512, 512]
    for gmlp, bert in zip(rows[::2], rows[1::2], strict=True):
        assert (gmlp["model"], bert["model"]) == ("gmlp", "bert")
        difference = abs(bert["parameters"] / gmlp["parameters"] - 1)
        assert difference < 0.01, (gmlp, bert)


@pytest.mark.one_backend("torch")
def test_the_amlp_is_against_a_bert_matched_to_it(monkeypatch):
    """The aMLP's tiny attention adds parameters: its ratio is against a
    BERT matched to the aMLP (`bert_amlp`) when that BERT runs, and
    against the gMLP's otherwise."""
    written = []
    monkeypatch.setattr(
        masked_lm_speed.common,
        "write_results",
        lambda name, report: written.append(report),
    )
    argv = ["--lengths", "16", "--vocabulary-size", "256"]
    argv += ["--batch-tokens", "64", "--rounds", "1", "--target-seconds", "0"]
    masked_lm_speed.main(argv + ["--models", "amlp", "bert", "bert_amlp"])
    masked_lm_speed.main(argv + ["--models", "amlp", "bert"])
    with_own, without = ({r["model"]: r for r in w["rows"]} for w in written)
    amlp = with_own["amlp"]["parameters"]
    assert abs(with_own["bert_amlp"]["parameters"] / amlp - 1) < 0.01
    assert with_own["bert"]["parameters"] < 0.97 * amlp
    assert with_own["amlp"]["baseline"] == "bert_amlp"
    assert without["amlp"]["baseline"] == "bert"
    for rows in (with_own, without):
        seconds = rows[rows["amlp"]["baseline"]]["median_s"]
        assert rows["amlp"]["x_bert"] == seconds / rows["amlp"]["median_s"]
