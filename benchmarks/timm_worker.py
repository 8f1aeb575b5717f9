"""The timm baseline of `benchmarks/vision.py` and `benchmarks/memory.py`.

Run with the python of a virtualenv that has timm (and torchvision); never
part of the project's set-up. Builds timm's model (random weights) and
answers commands on stdin (see `common.serve`):

- `{"op": "run", "mode": "train"|"infer", "precision": "float32"|
  "bfloat16", "steps": N}`: wall and CPU seconds of N steps. A training
  step is `model.train()`, forward, cross-entropy, backward and an AdamW
  step; inference is `model.eval()` under `torch.inference_mode()`.
  bfloat16 runs under `torch.autocast("cpu", torch.bfloat16)`.
- `{"op": "matmul", "precision": ..., "size": 2048, "repeats": R}`: seconds
  of R dense `size^3` matmuls, this process's torch.
- `{"op": "memory", "steps": N, "steady_steps": M}`: peak RSS
  (ru_maxrss) before and after N training steps, then the peak of M more
  steps after a reset of the peak (`common.steady_step_peak`).

Writes no results file: the driver records its answers.

Usage (normally started by the driver):
    /work/timm-venv/bin/python benchmarks/timm_worker.py \\
        --model gmlp_ti16_224 --batch-size 8 --image-size 224 --threads 2
"""

import argparse
import contextlib
import os
import resource
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="gmlp_ti16_224")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument(
        "--drop-path-rate", type=float, default=0.0, help="stochastic depth"
    )
    parser.add_argument(
        "--precisions", nargs="+", default=["float32"], help="to warm up"
    )
    args = parser.parse_args()

    import timm
    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = timm.create_model(
        args.model,
        pretrained=False,
        img_size=args.image_size,
        drop_path_rate=args.drop_path_rate,
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_function = torch.nn.CrossEntropyLoss()
    images = torch.rand(args.batch_size, 3, args.image_size, args.image_size)
    labels = torch.randint(0, 1000, (args.batch_size,))
    maxrss_built = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    def precision_context(precision):
        if precision == "float32":
            return contextlib.nullcontext()
        return torch.autocast("cpu", dtype=torch.bfloat16)

    def train_step(precision):
        model.train()
        optimizer.zero_grad(set_to_none=True)
        with precision_context(precision):
            loss = loss_function(model(images), labels)
        loss.backward()
        optimizer.step()

    def infer_step(precision):
        model.eval()
        with torch.inference_mode(), precision_context(precision):
            model(images)

    steps = {"train": train_step, "infer": infer_step}

    def run(mode, precision, steps_count):
        wall, cpu = common.timed(lambda: steps[mode](precision), steps_count)
        return {"seconds": wall, "cpu_seconds": cpu}

    def matmul(precision, size=2048, repeats=3):
        dtype = torch.float32 if precision == "float32" else torch.bfloat16
        a = torch.rand(size, size).to(dtype)
        b = torch.rand(size, size).to(dtype)
        torch.matmul(a, b)
        wall, cpu = common.timed(lambda: torch.matmul(a, b), repeats)
        return {"seconds": wall, "cpu_seconds": cpu}

    def memory(steps, steady_steps=0):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        for _ in range(steps):
            train_step("float32")
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        steady = common.steady_step_peak(
            lambda: train_step("float32"), steady_steps
        )
        return {
            "maxrss_built_kib": before,
            "maxrss_trained_kib": after,
            **steady,
        }

    for precision in args.precisions:
        for _ in range(args.warmup):
            train_step(precision)
            infer_step(precision)
    common.serve(
        {
            "run": lambda mode, precision, steps: run(mode, precision, steps),
            "matmul": matmul,
            "memory": memory,
            "info": lambda: {
                "versions": {
                    "timm": timm.__version__,
                    "torch": torch.__version__,
                },
                "parameters": sum(p.numel() for p in model.parameters()),
                "threads": torch.get_num_threads(),
                "maxrss_built_kib": maxrss_built,
            },
        }
    )


if __name__ == "__main__":
    main()
