"""Peak of live tensors in a torch training step: keras_gmlp against timm.

Issue 12, a companion of `memory.py`. RSS counts what the C allocator
holds, live tensors or not; this counts the tensors themselves. Each side
runs in a fresh process: two warm-up steps, then one step under torch's
profiler (`profile_memory=True`), whose memory timeline
(`torch.profiler.profile.export_memory_timeline`) gives the bytes alive
at every instant, by category (parameters, optimizer state, inputs,
temporaries, activations, gradients, autograd details, unknown). The
peak is the largest total; `x timm` = keras / timm. The keras side is
keras_gmlp under `KERAS_BACKEND=torch` (`model.train_on_batch`, AdamW),
timm's the same model in its virtualenv (`torch.optim.AdamW`, the preset's
drop-path rate), the same batch.

The profiler cannot see the release of a block allocated before it
started (it says so), so a step's peak may include the previous step's
gradients if they are freed during the profiled step: Keras frees them at
the start of its step (`zero_grad`), and the profiler does not classify
Keras' optimizer variables as optimizer state (they fall in `unknown`).

Measured (gMLP-Ti/16, batch 8, 224 px, float32, an idle 2-core AMD EPYC
with AVX2; `benchmarks/results/live_memory_gmlp_ti16_224.json`), MiB at
the peak:

| side | peak | activations | parameters | optimizer | inputs | unknown |
|---|---|---|---|---|---|---|
| keras_gmlp torch | 612 | 527 | 22.4 | (in unknown) | 9.2 | 45.1 |
| timm | 607 | 522 | 22.4 | 44.8 | 4.6 | 0 |

1.01x timm: the RSS gap of `memory.py` is the C allocator's, not tensors'.
After the spatial gating unit's recomputing training call under torch
(`keras_gmlp.layers.torch_spatial_gate`), an idle 2-core AMD EPYC with
AVX-512 (`live_memory_gmlp_ti16_224_recomputed_gate.json`): 414 MiB
against timm's 607 (0.68x), activations 320 against 522.

Usage:
    python benchmarks/live_memory.py --model gmlp_ti16_224 --batch-size 8
Results: benchmarks/results/live_memory_<model>.json
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

CATEGORIES = [
    "parameter",
    "optimizer_state",
    "input",
    "temporary",
    "activation",
    "gradient",
    "autograd_detail",
    "unknown",
]


def profiled_peak(step):
    """Runs `step` under torch's profiler; the peak of live bytes (MiB)
    and its split by category at that instant."""
    import numpy as np
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile

    with profile(
        activities=[ProfilerActivity.CPU],
        profile_memory=True,
        record_shapes=True,
        with_stack=True,
    ) as profiler:
        step()
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "timeline.json")
        profiler.export_memory_timeline(path, device="cpu")
        with open(path) as file:
            _, sizes = json.load(file)
    # Column 0 is unused; then the categories in CATEGORIES' order.
    sizes = np.asarray(sizes, dtype=np.float64)[:, 1:] / 2**20
    totals = sizes.sum(axis=1)
    peak = int(totals.argmax())
    return {
        "peak_live_mib": float(totals[peak]),
        "at_peak_mib": dict(
            zip(CATEGORIES, map(float, sizes[peak]), strict=True)
        ),
    }


def keras_side(model_name, batch_size, image_size, threads):
    common.configure_threads(threads)
    model = common.build_image_classifier(
        model_name, image_size, None, "float32"
    )
    images, labels = common.random_image_batch(batch_size, image_size)
    for _ in range(2):
        model.train_on_batch(images, labels)
    return profiled_peak(lambda: model.train_on_batch(images, labels))


def timm_side(model_name, batch_size, image_size, threads, drop_path_rate):
    import timm
    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = timm.create_model(
        model_name, img_size=image_size, drop_path_rate=drop_path_rate
    )
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_function = torch.nn.CrossEntropyLoss()
    images = torch.randn(batch_size, 3, image_size, image_size)
    labels = torch.randint(0, 1000, (batch_size,))

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss_function(model(images), labels).backward()
        optimizer.step()

    for _ in range(2):
        step()
    return profiled_peak(step)


def run_side(command, env):
    output = subprocess.run(
        command, env=env, check=True, capture_output=True, text=True
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--model", default="gmlp_ti16_224")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--timm-python", default=common.TIMM_PYTHON)
    parser.add_argument("--suffix", default="")
    # Internal: one side in this process.
    parser.add_argument(
        "--side", choices=["keras", "timm"], help=argparse.SUPPRESS
    )
    parser.add_argument(
        "--drop-path-rate", type=float, default=0.0, help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    shape = (args.model, args.batch_size, args.image_size, args.threads)
    if args.side == "keras":
        print(json.dumps(keras_side(*shape)))
        return
    if args.side == "timm":
        print(json.dumps(timm_side(*shape, args.drop_path_rate)))
        return

    arguments = [
        os.path.abspath(__file__),
        "--model",
        args.model,
        "--batch-size",
        str(args.batch_size),
        "--image-size",
        str(args.image_size),
        "--threads",
        str(args.threads),
    ]
    keras = run_side(
        [sys.executable, *arguments, "--side", "keras"],
        common.worker_env("torch", args.threads),
    )
    timm = run_side(
        [
            args.timm_python,
            *arguments,
            "--side",
            "timm",
            "--drop-path-rate",
            str(common.timm_drop_path_rate(args.model)),
        ],
        common.worker_env(None, args.threads),
    )
    record = common.header(with_backend=False)
    record["arguments"] = vars(args)
    record["keras_torch"] = keras
    record["timm"] = timm
    record["peak_x_timm"] = keras["peak_live_mib"] / timm["peak_live_mib"]
    common.write_results(f"live_memory_{args.model}{args.suffix}", record)
    rows = [
        {"side": side, "peak_live_mib": value["peak_live_mib"]}
        | value["at_peak_mib"]
        for side, value in (("keras_gmlp torch", keras), ("timm", timm))
    ]
    common.print_table(rows, ["side", "peak_live_mib", *CATEGORIES])
    print(f"\npeak x timm: {record['peak_x_timm']:.3f}")


if __name__ == "__main__":
    main()
