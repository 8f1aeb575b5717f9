"""torch's AdamW update: `FusedAdamW`'s fused kernel against Keras' own
updates.

Issue 12 (vision training against timm). A torch profile of a
`mixed_bfloat16` gMLP-Ti/16 training step at batch 32 (an idle 2-core AMD
EPYC, family 25, model 17, AVX-512 and AVX512-BF16, no AMX) counted about
13,800 `aten::to` and 1,300 each of `aten::mul`, `add` and `sub` a step:
the package's default optimizer, `FusedAdamW`, a subclass of Keras'
`AdamW`, ran the base optimizer's loop under torch, about 30 small ops a
variable (306 variables), because Keras hands its multi-tensor torch
update only to its own classes. `optimizer.apply` took 74 ms of the
1.3-1.4 s step; Keras' `AdamW` took 28 ms, timm's (torch's `foreach`
AdamW) about 22 ms.

Three forms, each a model of its own, its optimizer built by a first
step, then timed in interleaved rounds (`common.alternate`):
- `loop`: a plain subclass of `keras.optimizers.AdamW` (the base
  optimizer's loop; `FusedAdamW` under torch before stop 54),
- `multi_tensor`: `keras.optimizers.AdamW` (Keras' torch update, a few
  `torch._foreach_*` passes over all variables),
- `fused`: `keras_gmlp.training.FusedAdamW` (`torch._fused_adamw_`, one
  pass over each variable's arrays).

Measures: `apply` (the optimizer's update alone, on the model's
variables with fixed gradients) and `train` (`train_on_batch`), each
`x_baseline`: the row's baseline form over `fused` (above 1: `fused` is
faster).

Measured: see `benchmarks/README.md`, "Stop 54".

Usage:
    KERAS_BACKEND=torch python benchmarks/torch_adamw.py --batch-size 32
Results: benchmarks/results/torch_adamw_<model><suffix>_torch.json
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

FORMS = ("loop", "multi_tensor", "fused")


def optimizer_of(form):
    """A fresh optimizer of `form`, learning rate 1e-3, decay 0.05."""
    import keras

    from keras_gmlp.training import FusedAdamW

    class LoopAdamW(keras.optimizers.AdamW):
        """Keras' AdamW, as a subclass: the base optimizer's loop."""

    classes = {
        "loop": LoopAdamW,
        "multi_tensor": keras.optimizers.AdamW,
        "fused": FusedAdamW,
    }
    return classes[form](learning_rate=1e-3, weight_decay=0.05)


def form_functions(model_name, batch_size, precision):
    """`{"<measure> <form>": warm callable}` for every form."""
    import keras
    import numpy as np

    images, labels = common.random_image_batch(batch_size, 224)
    functions = {}
    for form in FORMS:
        model = common.build_image_classifier(
            model_name, 224, "auto", precision, optimizer=optimizer_of(form)
        )
        model.train_on_batch(images, labels)
        variables = model.trainable_variables
        rng = np.random.default_rng(0)
        grads = [
            keras.ops.convert_to_tensor(
                1e-3 * rng.normal(size=v.shape).astype("float32"), v.dtype
            )
            for v in variables
        ]

        def apply(optimizer=model.optimizer, grads=grads, variables=variables):
            optimizer.apply(grads, variables)

        def train(model=model):
            model.train_on_batch(images, labels)

        functions[f"apply {form}"] = apply
        functions[f"train {form}"] = train
    return functions


def main():
    args = common.ab_benchmark_parser(
        __doc__, ["float32", "mixed_bfloat16"], rounds=5
    ).parse_args()
    common.require_backend("torch", "torch_adamw measures torch's update.")
    common.configure_threads(args.threads)
    run = common.header()
    rows = []
    for precision in args.precisions:
        times = common.alternate(
            form_functions(args.model, args.batch_size, precision),
            args.rounds,
        )
        for measure in ("apply", "train"):
            for baseline in ("loop", "multi_tensor"):
                row = common.ab_row(
                    times[f"{measure} {baseline}"],
                    times[f"{measure} fused"],
                    "baseline",
                    "fused",
                )
                rows.append(
                    dict(
                        row,
                        baseline=baseline,
                        measure=measure,
                        precision=precision,
                        shape=args.model[:-4],
                    )
                )
    columns = common.ab_columns("baseline", "fused")
    columns.insert(1, "baseline")
    common.finish_report(
        run,
        rows,
        columns,
        f"torch_adamw_{args.model}{args.suffix}_{run['backend']}",
        rounds=args.rounds,
        batch_size=args.batch_size,
    )


if __name__ == "__main__":
    main()
