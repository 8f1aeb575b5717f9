"""What every benchmark result records: machine, versions, commit, command.

Imports nothing heavy, so that a worker process of another virtualenv (the
timm one) can use it too.
"""

import json
import os
import platform
import statistics
import subprocess
import sys

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# CPU flags that matter for the float32 / bfloat16 matmul rate.
RELEVANT_FLAGS = (
    "avx2",
    "avx512f",
    "avx512_bf16",
    "avx512_vnni",
    "amx_bf16",
    "amx_tile",
    "amx_int8",
)


def cpu_info():
    """CPU model, core count and the relevant flags, from /proc/cpuinfo."""
    model, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo") as file:
            for line in file:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and model != value.strip():
                    model = value.strip()
                elif key == "flags" and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    return {
        "cpu": model,
        "cpus": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)),
        "flags": [flag for flag in RELEVANT_FLAGS if flag in flags],
        "native_bfloat16": bool({"avx512_bf16", "amx_bf16"} & flags),
        "load_average": list(os.getloadavg()),
    }


def commit():
    """The repository's commit, with `+dirty` for uncommitted changes."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPOSITORY,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPOSITORY,
            capture_output=True,
            text=True,
        ).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def versions(modules):
    """Version of each importable module in `modules`."""
    found = {"python": platform.python_version()}
    for name in modules:
        try:
            module = __import__(name)
        except ImportError:
            continue
        found[name] = getattr(module, "__version__", "unknown")
    return found


def header(extra_versions=None):
    """The record every results file starts with."""
    return {
        "machine": cpu_info(),
        "commit": commit(),
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
        "environment": {
            key: os.environ[key]
            for key in (
                "KERAS_BACKEND",
                "OMP_WAIT_POLICY",
                "OMP_NUM_THREADS",
                "XLA_FLAGS",
                "TF_XLA_FLAGS",
            )
            if key in os.environ
        },
        "versions": extra_versions or {},
    }


def median(values):
    values = [value for value in values if value is not None]
    return statistics.median(values) if values else None


def write_json(name, record):
    """Writes `record` to `benchmarks/results/<name>.json`; returns path."""
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, f"{name}.json")
    with open(path, "w") as file:
        json.dump(record, file, indent=2)
        file.write("\n")
    return path


def print_table(rows, columns):
    """Prints `rows` (dicts) as a Markdown table of `columns`."""

    def cell(value):
        if value is None:
            return "-"
        if isinstance(value, float):
            return f"{value:.3g}"
        return str(value)

    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(cell(row.get(c)) for c in columns) + " |")


def timed(function, steps):
    """Runs `function()` `steps` times: wall seconds and CPU seconds.

    CPU seconds are the process's user + system time over all its threads,
    so `cpu / wall` is the number of cores the work kept busy.
    """
    import time

    start_cpu = sum(os.times()[:2])
    start = time.perf_counter()
    for _ in range(steps):
        function()
    wall = time.perf_counter() - start
    return wall, sum(os.times()[:2]) - start_cpu


def proc_status_kib(field):
    """A `VmRSS`/`VmHWM` line of /proc/self/status in KiB (None if absent)."""
    try:
        with open("/proc/self/status") as file:
            for line in file:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def release_free_memory():
    """Returns the C heap's free pages to the OS (glibc `malloc_trim`), so
    that RSS counts live memory only; a no-op elsewhere."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        pass


def steady_step_peak(step, steps):
    """Peak RSS growth of `steps` more calls of `step`, compilation over.

    `ru_maxrss` keeps the process's peak for good, so a first step that
    compiles (XLA, tf.function) hides the steady step's peak under the
    compiler's. Linux resets the peak (VmHWM) to the current RSS on
    writing 5 to /proc/self/clear_refs; the steady peak is VmHWM after the
    steps minus the RSS before them: activations kept for the backward
    pass, gradients and the optimizer's temporaries. The free memory the
    allocator keeps from earlier steps is handed back first
    (`release_free_memory`): resident, it would absorb the steps' peak.

    Returns:
        `{"steady_rss_kib", "steady_hwm_kib"}`, or `{}` where the reset is
        not available.
    """
    release_free_memory()
    try:
        with open("/proc/self/clear_refs", "w") as file:
            file.write("5")
    except OSError:
        return {}
    rss = proc_status_kib("VmRSS")
    for _ in range(steps):
        step()
    hwm = proc_status_kib("VmHWM")
    if rss is None or hwm is None:
        return {}
    return {"steady_rss_kib": rss, "steady_hwm_kib": hwm}


def serve(handlers):
    """A worker's loop: JSON commands on stdin, JSON answers on stdout.

    Each command is `{"op": name, ...}`; the answer is what
    `handlers[name](**rest)` returns, or `{"error": ...}`. Anything the
    libraries print goes to stderr, so stdout carries answers only.
    """
    import traceback

    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    answers.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        command = json.loads(line)
        op = command.pop("op")
        if op == "quit":
            break
        try:
            answer = handlers[op](**command)
        except Exception as error:  # reported to the driver, which goes on
            traceback.print_exc()
            answer = {"error": f"{type(error).__name__}: {error}"[:500]}
        answers.write(json.dumps(answer) + "\n")


def image_model_flops(
    image_size, patch_size, channels, hidden_dim, ffn_dim, num_layers, classes
):
    """Forward multiply-adds of one image through a gMLP image classifier.

    With n = (image_size / patch_size)^2 tokens, d = hidden_dim,
    f = ffn_dim:
        stem     n * (patch_size^2 * channels) * d
        block    n * d * f          (channel projection in)
               + n * n * f / 2      (spatial gating unit, W @ v)
               + n * f / 2 * d      (channel projection out)
        head     d * classes
    LayerNorm, GELU, the gating product and the mean pooling add O(n * f)
    per block (under 1 % here) and are not counted. FLOPs = 2 x multiply-
    adds; a training step costs 3 x the forward (forward, and the two
    products of the backward pass).
    """
    n = (image_size // patch_size) ** 2
    stem = n * patch_size * patch_size * channels * hidden_dim
    block = n * hidden_dim * ffn_dim + n * n * ffn_dim // 2
    block += n * ffn_dim // 2 * hidden_dim
    return stem + num_layers * block + hidden_dim * classes


IMAGE_MODELS = {
    # name: (hidden_dim, ffn_dim, num_layers), patch 16, 30 blocks.
    "gmlp_ti16_224": (128, 768, 30),
    "gmlp_s16_224": (256, 1536, 30),
    "gmlp_b16_224": (512, 3072, 30),
}


def forward_flops(model, image_size, classes=1000):
    """Forward FLOPs (2 x multiply-adds) of one image of `model`."""
    hidden_dim, ffn_dim, num_layers = IMAGE_MODELS[model]
    return 2 * image_model_flops(
        image_size, 16, 3, hidden_dim, ffn_dim, num_layers, classes
    )
