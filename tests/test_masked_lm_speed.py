"""The masked-LM speed benchmark (`benchmarks/masked_lm_speed.py`) times
the gMLP and its matched BERT through the same training step."""

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
