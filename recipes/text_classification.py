"""Fine-tunes a pretrained gMLP (or trains one from scratch) to classify text.

The same as `keras-gmlp finetune` (`keras_gmlp.workflows.
text_classification`); `--help` lists every flag.

Data: a tensorflow-datasets dataset (`--tfds-name glue/sst2`,
`imdb_reviews`, `glue/mnli` ...) or CSV/TSV files with a text column, an
optional second text column (sentence pairs, packed
`[CLS] a [SEP] b [SEP]`) and a label column. The classifier predicts from
the first (`[CLS]`) token, as in the paper. Reports accuracy, and F1 of
class 1 for binary tasks, on the validation split.

Usage:

```
python recipes/text_classification.py --pretrained runs/gmlp_tiny \\
    --train-file train.csv --validation-file valid.csv \\
    --text-column text --label-column label --output-dir runs/clf
python recipes/text_classification.py --tfds-name glue/sst2 \\
    --preset gmlp_tiny --vocabulary vocabulary.txt --output-dir runs/sst2
```
"""

import sys

import keras_gmlp


def main(argv=None, callbacks=None):
    """Runs the recipe; returns the results dict.

    Args:
        argv: list of str. The command-line flags; defaults to
            `sys.argv[1:]`.
        callbacks: list of `keras.callbacks.Callback` or `None`. Extra
            callbacks for `model.fit`.
    """
    # Imported when run, after `set_backend_environment()`: they load
    # the backend.
    from keras_gmlp.workflows import text_classification

    config = text_classification.config_from_argv(argv)
    return text_classification.run(config, callbacks=callbacks)


if __name__ == "__main__":
    keras_gmlp.set_backend_environment()  # first: before the backend loads
    keras_gmlp.kernels.configure_training_process()  # memory, XLA, threads
    main(sys.argv[1:])
