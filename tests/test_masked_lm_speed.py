"""The masked-LM speed benchmark (`benchmarks/masked_lm_speed.py`) times
the gMLP and its matched BERT through the same training step."""

import pytest

from benchmarks import masked_lm_speed


def trained_metric_names(name):
    model, _ = masked_lm_speed.build(name, "gmlp_tiny", 16, 64)
    x, y = masked_lm_speed.batch(model, 16, 2, 64)
    logs = model.train_on_batch(x, y, return_dict=True)
    return sorted(logs)


def test_every_model_trains_with_the_same_loss_and_metrics():
    # GMLPMaskedLM.compile adds keras-hub's accuracy unless told otherwise;
    # the BERT wrapper's plain compile did not: the gMLP paid for an
    # argmax over the vocabulary in every timed step and BERT did not.
    gmlp = trained_metric_names("gmlp")
    assert gmlp == trained_metric_names("bert")
    assert "masked_accuracy" in gmlp and "perplexity" in gmlp


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
