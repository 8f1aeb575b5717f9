"""Pretrains a gMLP/aMLP (or a matched Transformer) language model on text.

The same as `keras-gmlp pretrain` (`keras_gmlp.workflows.pretraining`);
`--help` lists every flag. Streams a corpus (plain-text files or a
tensorflow-datasets dataset), learns or loads a WordPiece vocabulary, packs
`[CLS] ... [SEP]` sequences, masks them inside tf.data (15 %, 80/10/10)
and trains with AdamW, warmup and linear decay. Evaluates masked-token
accuracy and perplexity on a held-out split that never reaches training.
Killed and started again with the same command, it resumes from its last
completed epoch.

Usage:

```
python recipes/masked_lm.py --text-files "corpus/*.txt" \\
    --preset gmlp_tiny --epochs 10 --steps-per-epoch 200 \\
    --output-dir runs/gmlp_tiny
python recipes/masked_lm.py --output-dir runs/gmlp_tiny \\
    --predict "the [MASK] sat on the mat"
```

`--objective causal` trains a causal (next-token) gMLP instead;
`--architecture bert|roformer_v2|deberta_v3|fnet` trains that keras-hub
Transformer (`transformer` is BERT, or GPT-2 for `--objective causal`) with
about the same number of parameters through the same pipeline;
`--spatial-unit` selects the spatial unit of the paper's ablation (Table 3).
`--predict` is `keras-gmlp fill-mask`.
"""

import sys

import keras_gmlp


def main(argv=None, callbacks=None):
    """Runs the recipe; returns the results dict (or the predictions).

    Args:
        argv: list of str. The command-line flags; defaults to
            `sys.argv[1:]`.
        callbacks: list of `keras.callbacks.Callback` or `None`. Extra
            callbacks for `model.fit`.
    """
    # Imported when run, after `set_backend_environment()`: they load
    # the backend.
    from keras_gmlp.training.arguments import config_from_args
    from keras_gmlp.training.arguments import positive_int
    from keras_gmlp.workflows import pretraining

    parser = pretraining.build_parser()
    demo = parser.add_argument_group("fill-in-the-blank demo")
    demo.add_argument(
        "--predict",
        help="Print the top-k fillers of each [MASK] of this text, from the "
        "run in --output-dir, and exit.",
    )
    demo.add_argument("--top-k", type=positive_int, default=5)
    args = parser.parse_args(argv)
    if args.predict is not None:
        predictions = pretraining.fill_in_the_blank(
            args.output_dir, args.predict, args.top_k
        )
        for index, fillers in enumerate(predictions):
            shown = ", ".join(f"{t} ({p:.3f})" for t, p in fillers)
            print(f"[MASK] {index + 1}: {shown}")
        return predictions
    config = config_from_args(pretraining.CONFIG_CLASS, args)
    return pretraining.run(config, callbacks=callbacks)


if __name__ == "__main__":
    keras_gmlp.set_backend_environment()  # first: before the backend loads
    keras_gmlp.kernels.configure_training_process()  # memory, XLA, threads
    main(sys.argv[1:])
