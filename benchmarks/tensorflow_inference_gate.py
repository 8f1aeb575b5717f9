"""A/B under TensorFlow: bfloat16 inference with the first projection's
bias and GELU fused into oneDNN's product (`fused_product`, the previous
form) vs computed in the spatial gating unit's XLA functions
(`gate_functions`, `keras_gmlp.layers.tensorflow_spatial_gate.
inference_spatial_gate`).

Issue 12. Found with TensorFlow's profiler (xplane, per op, one
`mixed_bfloat16` gMLP-S/16 `predict_on_batch` at batch 32, an idle 2-core
Xeon with AVX-512, AVX512-BF16 and AMX; about 1,300 thread-ms a step):
665 thread-ms in `_MklNativeFusedMatMul`, the first projection's halves
with their biases and GELUs, about 11 ms a call; 290 in the XLA
functions (the LayerNorms), 88 in the gating's `Mul`, 66 in the token
products and 58 in the second projections. Grappler fuses a 2-D `MatMul`
and its bias into oneDNN's `inner_product`, which in bfloat16 does not
run on AMX (`benchmarks/dense_gelu_kernels.py`): at gMLP-S's
`(6272, 256) x (256, 768)` the product alone took 2.2 ms, with its bias
4.3 and with bias and GELU 5.0. A plain product and the block's XLA GELU
after it cost as much as the fused kernel, the GELU's pass over the
expanded activations being the difference; here the GELU and the bias
are computed where the halves are read anyway: `v`'s in the norm's XLA
function, `u`'s in the gating's, which also adds the token product's bias
(and aMLP's attention) and replaces TensorFlow's add and multiply.

Measured per model (the `--model` flag), `train_on_batch` as a control
(training takes neither path), `x fused_product` the baseline's seconds
over the candidate's (above 1: faster), interleaved rounds
(`common.alternate`). Only `mixed_bfloat16` takes the new form: in
scratch A/Bs on the same machine it made float32 gMLP-S inference 0.87x
as fast (oneDNN's fused kernel runs the float32 product at the plain
one's rate) and `mixed_float16` gMLP-Ti inference 0.96x.

On an idle 2-core AMD EPYC (family 26, model 2) with AVX512-BF16 and no
AMX, batch 32, 5 rounds, at f9283a3
(`tensorflow_inference_gate_epyc_avx512_gmlp_{ti16,s16}_stop44_tensorflow
.json`), x the fused product: bfloat16 inference **0.86x** (0.79-0.93,
gMLP-Ti/16) and **0.90x** (0.86-0.92, gMLP-S/16), training (control)
0.99x. There oneDNN's fused kernel runs on the same AVX512-BF16 units as
a plain product, so the package takes the gate only on a CPU with AMX
(`keras_gmlp.layers.cpu_features.has_amx`); this benchmark's candidate
takes it as if the CPU had AMX.

Usage:
    KERAS_BACKEND=tensorflow python benchmarks/tensorflow_inference_gate.py \\
        --batch-size 32 --model gmlp_s16_224
Results: benchmarks/results/tensorflow_inference_gate_tensorflow.json
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

BASELINE = "fused_product"
CANDIDATE = "gate_functions"
PRECISIONS = ("mixed_bfloat16",)


def variant(name):
    """A context in which the blocks traced take the `name` form: the gate
    as on a CPU with AMX (where the package takes it), or never."""
    from keras_gmlp.layers import cpu_features
    from keras_gmlp.layers.spatial_gating_unit import SpatialGatingUnit

    if name == CANDIDATE:
        return common.patched(cpu_features, "has_amx", lambda: True)

    def never(self, hidden):
        return False

    return common.patched(
        SpatialGatingUnit, "takes_tensorflow_inference_gate", never
    )


if __name__ == "__main__":
    common.run_ab(
        __doc__,
        "tensorflow_inference_gate",
        BASELINE,
        CANDIDATE,
        PRECISIONS,
        "tensorflow",
        variant,
    )
