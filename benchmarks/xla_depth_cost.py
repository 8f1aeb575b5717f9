"""XLA's count of a gMLP training step's work against the model's depth.

Issue 12: checks whether the JAX backward does work quadratic in depth
(many-operand fusions in the optimised HLO suggested it, see
`vision.py`). For each depth the gradient of the image classifier's loss
(`model.stateless_call` under `jax.value_and_grad`, jitted) is compiled,
and XLA's own cost analysis of the compiled module gives its FLOPs and
bytes accessed; the `copy`/`transpose` instructions of the optimised HLO
are counted too. Work linear in depth has constant increments per block;
quadratic work has growing ones. The formula count of the same model
(`common.image_model_flops`, 3 x the forward) is printed beside.

Usage:
    KERAS_BACKEND=jax python benchmarks/xla_depth_cost.py --depths 2 4 8
Results: benchmarks/results/xla_depth_cost_jax.json
"""

import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402


def compiled_gradient(depth, args):
    import jax
    import keras

    from keras_gmlp import models

    model = models.image_classifier(
        args.preset, image_size=args.image_size, num_layers=depth
    )
    images, labels = common.random_image_batch(args.batch_size, args.image_size)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def loss_of(trainable, non_trainable, images, labels):
        logits, _ = model.stateless_call(
            trainable, non_trainable, images, training=True
        )
        return loss(labels, logits)

    gradient = jax.jit(jax.value_and_grad(loss_of))
    trainable = [v.value for v in model.trainable_variables]
    non_trainable = [v.value for v in model.non_trainable_variables]
    return gradient.lower(trainable, non_trainable, images, labels).compile()


def measure(depth, args):
    compiled = compiled_gradient(depth, args)
    cost = compiled.cost_analysis()
    if isinstance(cost, list):  # older jax: one dict per computation
        cost = cost[0]
    text = compiled.as_text()
    hidden_dim, ffn_dim, _ = common.IMAGE_MODELS[args.preset]
    formula = common.image_model_flops(
        args.image_size, 16, 3, hidden_dim, ffn_dim, depth, 1000
    )
    return {
        "depth": depth,
        "xla_flops": cost.get("flops"),
        "xla_bytes_accessed": cost.get("bytes accessed"),
        "hlo_copies": len(re.findall(r"= \S+ copy\(", text)),
        "hlo_transposes": len(re.findall(r"= \S+ transpose\(", text)),
        # 3 x the forward's FLOPs (2 x multiply-adds).
        "formula_training_flops": 3 * 2 * formula * args.batch_size,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--preset",
        default="gmlp_ti16_224",
        choices=["gmlp_ti16_224", "gmlp_s16_224"],
    )
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--depths", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--name", default="xla_depth_cost")
    args = parser.parse_args(argv)
    rows, previous = [], None
    for depth in args.depths:
        row = measure(depth, args)
        if previous:
            blocks = depth - previous["depth"]
            row["xla_flops_per_added_block"] = (
                row["xla_flops"] - previous["xla_flops"]
            ) / blocks
            row["formula_flops_per_added_block"] = (
                row["formula_training_flops"]
                - previous["formula_training_flops"]
            ) / blocks
        print(row, flush=True)
        rows.append(row)
        previous = row
    report = common.header()
    report.update({"arguments": vars(args), "rows": rows})
    path = common.write_results(f"{args.name}_{report['backend']}", report)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
