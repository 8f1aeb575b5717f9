"""The learning-rate sweep driver (`benchmarks/sweep.py`)."""

import json
import math
import random

import pytest

from benchmarks import sweep

WORDS = "the cat sat on a mat while dog ran in park big small red".split()


def record(metric, steps=10, loss=3.0, baseline=50.0):
    return {
        "metrics": {
            "val_perplexity": metric,
            "val_unigram_perplexity": baseline,
        },
        "steps": steps,
        "final_training_loss": loss,
        "model": {"trainable_parameters": 1000},
    }


def test_help_lists_the_sweep_flags():
    text = sweep.build_parser().format_help()
    for flag in ("--budget-seconds", "--learning-rates", "--seeds", "--cores"):
        assert flag in text


def test_variants_are_models_of_their_own():
    models = sweep.sweep_models(
        "mlm",
        None,
        [
            "amlp=--preset amlp_tiny",
            "linear = --spatial-unit linear",
            "bert_big=--architecture bert --transformer-layers 3",
        ],
    )
    assert models == {
        "amlp": ("gmlp", ["--preset", "amlp_tiny"]),
        "linear": ("gmlp", ["--spatial-unit", "linear"]),
        "bert_big": (
            "bert",
            ["--architecture", "bert", "--transformer-layers", "3"],
        ),
    }
    both = sweep.sweep_models("mlm", ["gmlp"], ["amlp=--preset amlp_tiny"])
    assert list(both) == ["gmlp", "amlp"]
    assert list(sweep.sweep_models("image", None, [])) == ["gmlp", "vit"]
    with pytest.raises(ValueError, match="'--preset amlp_tiny'.*LABEL=FLAGS"):
        sweep.sweep_models("mlm", None, ["--preset amlp_tiny"])
    with pytest.raises(ValueError, match="'gmlp' is swept twice"):
        sweep.sweep_models("mlm", ["gmlp"], ["gmlp=--spatial-unit linear"])


def test_an_earlier_sweep_joins_the_table(tmp_path):
    earlier = tmp_path / "sweep_first.json"
    earlier.write_text(
        json.dumps(
            {
                "job": "mlm",
                "runs": [
                    {"architecture": "gmlp", "learning_rate": 1e-3,
                     "record": record(30)},
                ],
            }
        )
    )  # fmt: skip
    runs = sweep.included_runs(str(earlier), "mlm")
    runs.append(
        {"architecture": "gmlp", "learning_rate": 2e-3, "record": record(20)}
    )
    rows, by_rate = sweep.summarise("mlm", runs)
    assert rows[0]["learning_rate"] == 2e-3 and len(by_rate) == 2
    with pytest.raises(ValueError, match="of job 'mlm'; expected 'image'"):
        sweep.included_runs(str(earlier), "image")


def test_each_architecture_keeps_its_best_mean_learning_rate():
    runs = [
        # gmlp: 1e-3 is better on average (20, 22) than 2e-3 (10, 40).
        {"architecture": "gmlp", "learning_rate": 1e-3, "record": record(20)},
        {"architecture": "gmlp", "learning_rate": 1e-3, "record": record(22)},
        {"architecture": "gmlp", "learning_rate": 2e-3, "record": record(10)},
        {"architecture": "gmlp", "learning_rate": 2e-3, "record": record(40)},
        {"architecture": "fnet", "learning_rate": 5e-4, "record": record(30)},
        {"architecture": "fnet", "learning_rate": 5e-4, "record": None},
    ]
    rows, by_rate = sweep.summarise("mlm", runs)
    assert [row["architecture"] for row in rows] == ["gmlp", "fnet"]
    gmlp = rows[0]
    assert gmlp["learning_rate"] == 1e-3
    assert gmlp["mean"] == pytest.approx(21)
    assert gmlp["spread"] == pytest.approx(math.sqrt(2))
    assert gmlp["seeds"] == 2 and gmlp["baseline"] == 50
    assert rows[1]["seeds"] == 1 and rows[1]["spread"] == 0
    assert len(by_rate) == 3
    table = sweep.markdown("mlm", rows, 60)
    assert "| gmlp | 1.00e-03 | 21 ± 1.4 | 2 |" in table


@pytest.mark.large
def test_a_tiny_sweep_writes_the_table(tmp_path):
    rng = random.Random(0)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(
        "\n".join(
            " ".join(rng.choices(WORDS, k=rng.randint(4, 12)))
            for _ in range(300)
        )
    )
    job_flags = [
        "--text-files", str(corpus),
        "--validation-fraction", "0.1",
        "--vocabulary-size", "60",
        "--sequence-length", "16",
        "--num-layers", "2",
        "--hidden-dim", "16",
        "--ffn-dim", "32",
        "--batch-size", "4",
        "--validation-batches", "2",
        "--shuffle-buffer", "16",
        "--unigram-tokens", "2000",
    ]  # fmt: skip
    report = sweep.main(
        [
            "--job",
            "mlm",
            "--architectures",
            "gmlp",
            "fnet",
            "--learning-rates",
            "1e-3",
            "--seeds",
            "0",
            "--steps",
            "2",
            "--budget-seconds",
            "5",
            "--parallel",
            "2",
            "--name",
            "smoke",
            "--work-dir",
            str(tmp_path / "runs"),
            "--results-dir",
            str(tmp_path / "results"),
            "--",
            *job_flags,
        ]  # fmt: skip
    )
    assert [run["exit_code"] for run in report["runs"]] == [0, 0]
    with open(tmp_path / "results" / "sweep_smoke.json") as file:
        saved = json.load(file)
    rows = {row["architecture"]: row for row in saved["table"]}
    assert set(rows) == {"gmlp", "fnet"}
    for row in rows.values():
        assert row["learning_rate"] == 1e-3
        assert 1 <= row["steps"] <= 2
        assert 1 < row["mean"] < 1e3 and row["baseline"] > 1
        assert math.isfinite(row["final_training_loss"])
    # Matched sizes: within a few per cent of each other.
    assert rows["fnet"]["parameters"] == pytest.approx(
        rows["gmlp"]["parameters"], rel=0.03
    )
    table = (tmp_path / "results" / "sweep_smoke.md").read_text()
    assert "| fnet |" in table and "unigram ppl" in table
