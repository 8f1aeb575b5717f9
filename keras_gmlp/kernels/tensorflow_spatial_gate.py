"""The spatial gating unit's calls on the gMLP block's projection under
TensorFlow: in training, its gated half (and in bfloat16 its gate input) as
XLA functions with hand-written gradients, or for a unit made under
`keras.RematScope`, with the activations kept for the backward pass cut by
recomputation; in bfloat16 inference, with the projection's bias and GELU
in the XLA functions that read its halves.

Imported by the unit under the TensorFlow backend only.
"""

import functools

import tensorflow as tf

from keras_gmlp.kernels.gelu import _tensorflow_cdf_and_density
from keras_gmlp.kernels.gelu import _tensorflow_gelu
from keras_gmlp.kernels.layer_normalization import _tensorflow_layer_norm
from keras_gmlp.kernels.layer_normalization import column_sum
from keras_gmlp.kernels.layer_normalization import row_mean
from keras_gmlp.kernels.layer_normalization import tensorflow_affine_normalized
from keras_gmlp.kernels.xla_functions import widened


def recomputed_spatial_gate(
    hidden,
    gamma,
    beta,
    epsilon,
    weight,
    bias,
    attention,
    kernel=None,
    projection_bias=None,
    hidden_biases=None,
):
    """`u * (W @ LayerNorm(v) + b [+ attention])`, `u` and `v` the GELUs of
    `hidden`'s halves (plus `hidden_biases` if given), and that times
    `kernel` plus `projection_bias` if given (the block's second
    projection), keeping only `hidden` and `W @ LayerNorm(v) + b` for the
    backward pass.

    Under a `tf.GradientTape`, TensorFlow keeps every tensor a gradient
    reads: both halves of the GELU's input and output, the normalised
    `v`, the product and the gated output (the second projection's
    kernel gradient reads it): `3.5 f` values per token for `f` expanded
    channels (the default training gate, `training_gelu_gate` with the
    projection folded in, `2.5 f` in float32 and `2 f` in bfloat16), where
    this `tf.custom_gradient` keeps `1.5 f`. The forward
    pass runs the unit's own XLA functions (`gelu`, `LayerNormalization`)
    and `MatMul`s. The backward pass recomputes:

    - in one XLA function, `u`, the gated output (for the second
      projection's kernel gradient), and the gradients of the product and
      of `u`'s half of `hidden`;
    - `v` and the normalised `v` (for the token product's weight
      gradient), with the forward pass's functions, then the norm's and
      the GELU's own gradient functions.

    With `hidden_biases` the gradient functions of `u`'s and `v`'s halves
    also sum their biases' gradients, as `keras_gmlp.kernels.gelu.
    biased_gelu` does (no TensorFlow `Sum` over the expanded activations).

    Each value is rounded to the compute dtype where the usual call
    rounds it: outputs and gradients are the usual call's up to float32
    rounding.

    The unit takes it under `keras.RematScope(mode="activations")` only:
    it trades time for memory, the steps about 10 % slower, the first
    steps' peak RSS of gMLP-Ti/16 training at batch 32 0.86x timm's
    (`benchmarks/memory.py`). First-order gradients only.

    Args:
        hidden: tensor `(batch, tokens, 2 c)`, the block's first projection
            before its GELU, or the pair of its halves, each
            `(batch, tokens, c)`.
        gamma: tensor `(c,)`, the norm's scale (float32 under a mixed
            policy).
        beta: tensor `(c,)`, the norm's center.
        epsilon: float, the norm's epsilon.
        weight: tensor `(tokens, tokens)`, `W`, in `hidden`'s dtype.
        bias: tensor `(tokens,)`, `b`, in `hidden`'s dtype.
        attention: `None` or a tensor `(batch, tokens, c)` added to the
            product (aMLP), in `hidden`'s dtype.
        kernel: `None` or a tensor `(c, d)` in `hidden`'s dtype.
        projection_bias: `None` or a tensor `(d,)`, with `kernel`.
        hidden_biases: `None` or, with `hidden` a pair, the pair of biases
            `(c,)` added to its halves (`hidden` then the products before
            them: `keras_gmlp.kernels.gelu.split_products`).

    Returns:
        Tensor `(batch, tokens, c)`, or `(batch, tokens, d)` with `kernel`,
        in `hidden`'s dtype.
    """
    if isinstance(hidden, (tuple, list)):
        hidden_u, hidden_v = hidden
    elif hidden_biases is not None:
        raise ValueError(
            "`hidden_biases` go with `hidden` as the pair of its halves; "
            f"received one tensor of shape {tuple(hidden.shape)}."
        )
    else:
        hidden_u, hidden_v = tf.split(hidden, 2, axis=-1)
    tensors = [hidden_u, hidden_v, gamma, beta, weight, bias]
    has_attention = attention is not None
    has_projection = kernel is not None
    has_hidden_biases = hidden_biases is not None
    if has_attention:
        tensors.append(attention)
    if has_projection:
        tensors += [kernel, projection_bias]
    if has_hidden_biases:
        tensors += list(hidden_biases)
    # Variables are read here: a custom gradient must not read any.
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    functions = _gate_functions()

    @tf.autograph.experimental.do_not_convert
    @tf.custom_gradient
    def gate(*tensors):
        hidden_u, hidden_v, gamma, beta, weight, bias = tensors[:6]
        rest = list(tensors[6:])
        added = rest.pop(0) if has_attention else None
        if has_hidden_biases:
            # The adds `bias_add` makes; their sums are the halves kept.
            hidden_u = hidden_u + rest[-2]
            hidden_v = hidden_v + rest[-1]
            rest = rest[:-2]
        u = functions.gelu(hidden_u)
        z = functions.layer_norm(functions.gelu(hidden_v), gamma, beta, epsilon)
        mixed = tf.matmul(weight, z) + bias[:, None]
        if has_attention:
            mixed = mixed + added
        output = u * mixed
        if has_projection:
            output = _project(output, *rest)

        def backward(upstream):
            by_projection = []
            if has_projection:
                by_gated = _projected_gradient(upstream, rest[0], mixed)
                gated, by_mixed, *by_hidden_u = functions.gated_half(
                    hidden_u, mixed, by_gated, True, has_hidden_biases
                )
                by_projection = _projection_gradients(gated, upstream)
            else:
                by_mixed, *by_hidden_u = functions.gated_half(
                    hidden_u, mixed, upstream, False, has_hidden_biases
                )
            # Recomputed once the backward pass has begun (TensorFlow's
            # executor runs an op as soon as its inputs are ready, so
            # without the dependency it could recompute `v` during the
            # forward pass and keep it), beside the gated half's work
            # rather than after `by_mixed`, which is slower.
            with tf.control_dependencies([upstream]):
                v = functions.gelu(hidden_v)
            z = functions.layer_norm(v, gamma, beta, epsilon)
            by_weight = tf.reduce_sum(
                tf.matmul(by_mixed, z, transpose_b=True), axis=0
            )
            by_z = tf.matmul(weight, by_mixed, transpose_a=True)
            by_bias = _float32_sum(by_mixed, [0, 2], by_mixed.dtype)
            by_v, by_gamma, by_beta = functions.layer_norm_gradient(
                v, gamma, epsilon, by_z
            )
            if has_hidden_biases:
                by_hidden_v = functions.biased_gelu_gradient(hidden_v, by_v)
            else:
                by_hidden_v = [functions.gelu_gradient(hidden_v, by_v)]
            # With the biases, each half's is its input's gradient, then
            # its bias's.
            by_attention = [by_mixed] if has_attention else []
            return [
                by_hidden_u[0],
                by_hidden_v[0],
                by_gamma,
                by_beta,
                by_weight,
                by_bias,
                *by_attention,
                *by_projection,
                *by_hidden_u[1:],
                *by_hidden_v[1:],
            ]

        return output, backward

    return gate(*tensors)


def inference_spatial_gate(
    products, biases, gamma, beta, epsilon, weight, bias, attention
):
    """`u * (W @ LayerNorm(v) + b [+ attention])`, `u` and `v` the GELUs of
    the block's first projection's halves `products[i] + biases[i]`: the
    unit's inference call on the projection before its bias and GELU,
    under a bfloat16 policy.

    Otherwise TensorFlow's graph optimiser fuses each half's product, bias
    and GELU into one oneDNN kernel (`keras_gmlp.kernels.gelu.dense_gelu`),
    which in bfloat16 runs `inner_product`, not the AMX kernels of a plain
    `MatMul`, and the XLA GELU after a plain product costs another pass
    over the expanded activations. Here the products are plain `MatMul`s
    and each half's bias and GELU are computed in the XLA function that
    reads the half anyway: `v`'s in the norm's (`normalized_gelu`), `u`'s
    in the gating's (`gelu_gate`, with the token product's bias and
    `attention`), which replaces TensorFlow's add and multiply kernels.
    It makes gMLP-S/16 inference at batch 32 1.2x faster on a CPU with AMX
    (`benchmarks/vision.py`); in float32 and float16, and in bfloat16
    without AMX, the fused kernels are faster, so the unit takes this
    gate only on a CPU with AMX (`keras_gmlp.kernels.cpu_features.has_amx`).

    Each value is rounded to the compute dtype where the usual call rounds
    it (the sum of product and bias too, as `biased_gelu` rounds it in
    training): outputs are the usual call's up to that rounding.

    Args:
        products: pair of tensors `(batch, tokens, c)`, the halves'
            products before their biases
            (`keras_gmlp.kernels.gelu.split_products`).
        biases: pair of tensors `(c,)`, the halves' biases.
        gamma: tensor `(c,)`, the norm's scale.
        beta: tensor `(c,)`, the norm's center.
        epsilon: float, the norm's epsilon.
        weight: tensor `(tokens, tokens)`, `W`, in the products' dtype.
        bias: tensor `(tokens,)`, `b`, in the products' dtype.
        attention: `None` or a tensor `(batch, tokens, c)` added to the
            product (aMLP), in the products' dtype.

    Returns:
        Tensor `(batch, tokens, c)` in the products' dtype.
    """
    hidden_u, hidden_v = (tf.convert_to_tensor(p) for p in products)
    bias_u, bias_v = (tf.convert_to_tensor(b) for b in biases)
    functions = _gate_functions()
    z = functions.normalized_gelu(
        hidden_v,
        bias_v,
        tf.convert_to_tensor(gamma),
        tf.convert_to_tensor(beta),
        epsilon,
    )
    product = tf.matmul(weight, z)
    return functions.gelu_gate(hidden_u, bias_u, product, bias, attention)


def training_normalized_gelu(hidden_v, bias_v, gamma, beta, epsilon):
    """`LayerNorm(gelu(hidden_v + bias_v))`: the spatial gating unit's
    normalised gate input in TensorFlow training, as one XLA function, and
    its gradient as another.

    The usual call runs it as TensorFlow's `AddV2` (the first
    projection's bias), then the GELU's and the norm's XLA functions, and
    keeps for the backward pass the GELU's input and its output (the
    norm's input); the backward pass is the norm's gradient function,
    then the GELU's. Here the forward pass is one function of `hidden_v`,
    the backward pass one that recomputes the GELU from `hidden_v` and
    writes the gradients of `hidden_v`, of `bias_v` and of the norm's
    weights; it keeps `hidden_v` only. The unit takes it in bfloat16 and
    float16, where it is faster than TensorFlow's own differentiation;
    in float32 XLA:CPU's fused GELU and norm are slower.
    Outputs are the usual call's up to rounding: XLA may keep the biased
    GELU's sum in float32 where TensorFlow rounds it.

    Args:
        hidden_v: tensor `(batch, tokens, c)`, the gate's half's product
            before its bias (`keras_gmlp.kernels.gelu.split_products`).
        bias_v: tensor `(c,)`, its bias.
        gamma: tensor `(c,)`, the norm's scale.
        beta: tensor `(c,)`, the norm's center.
        epsilon: float, the norm's epsilon.

    Returns:
        Tensor `(batch, tokens, c)` in `hidden_v`'s dtype.
    """
    tensors = [tf.convert_to_tensor(t) for t in (hidden_v, bias_v)]
    tensors += [tf.convert_to_tensor(t) for t in (gamma, beta)]
    functions = _gate_functions()

    @tf.autograph.experimental.do_not_convert
    @tf.custom_gradient
    def normalized(hidden_v, bias_v, gamma, beta):
        output = functions.normalized_gelu(
            hidden_v, bias_v, gamma, beta, epsilon
        )

        def backward(upstream):
            return list(
                functions.normalized_gelu_gradient(
                    hidden_v, bias_v, gamma, epsilon, upstream
                )
            )

        return output, backward

    return normalized(*tensors)


def training_gelu_gate(
    hidden_u,
    bias_u,
    product,
    bias,
    attention=None,
    kernel=None,
    projection_bias=None,
):
    """`gelu(hidden_u + bias_u) * (product + b [+ attention])`, `b` along
    the token axis, and that times `kernel` plus `projection_bias` if given
    (the block's second projection): the spatial gating unit's gated half
    in TensorFlow training, as one XLA function, and its gradient as
    another.

    The usual call runs it as TensorFlow's `AddV2` (the first
    projection's bias), the GELU's XLA function, an `AddV2` for `b`
    (another for `attention`) and a `Mul`, and its gradient as two
    `Mul`s, a `Sum` over the batch and channels for `b` and the GELU's
    gradient function: separate passes over `(batch, tokens, channels)`
    arrays, and TensorFlow keeps three of them for the backward pass (the
    GELU's input, `u` and the gate). Here the forward pass is one pass
    over `hidden_u` and the product; the backward pass one more that
    recomputes `u` from `hidden_u` and writes the gradients of
    `hidden_u` and of the product, with the biases' sums (`b`'s as a
    product with ones, which XLA:CPU runs 3-4x faster than its reduction
    over the rows and channels). It keeps `hidden_u` and the product (and
    `attention`): a third less than the usual call keeps.

    With `kernel`, the projection's product of the gated output's rows is
    inside too, and the backward pass's function writes the gated output
    again for the kernel's gradient, so the gated output is not kept
    either (TensorFlow's `MatMul` gradient keeps its input): `0.5 f`
    values a token less, the first steps' peak RSS of float32 gMLP-Ti/16
    training at batch 32 0.90x timm's (`benchmarks/memory.py`).

    Each value is rounded to the compute dtype where the usual call
    rounds it, the biases' gradients accumulated in float32: in float32
    outputs are the usual call's and gradients equal up to rounding; in
    bfloat16 both within a bfloat16 rounding (XLA may keep a sum in
    float32 where TensorFlow rounds it).

    Args:
        hidden_u: tensor `(batch, tokens, c)`, the gated half's product
            before its bias (`keras_gmlp.kernels.gelu.split_products`).
        bias_u: tensor `(c,)`, its bias.
        product: tensor `(batch, tokens, c)`, `W @ LayerNorm(v)`.
        bias: tensor `(tokens,)`, `b`.
        attention: `None` or a tensor `(batch, tokens, c)` added to the
            product (aMLP).
        kernel: `None` or a tensor `(c, d)` in `hidden_u`'s dtype.
        projection_bias: `None` or a tensor `(d,)`, with `kernel`.

    Returns:
        Tensor `(batch, tokens, c)`, or `(batch, tokens, d)` with `kernel`,
        in `hidden_u`'s dtype.
    """
    if (kernel is None) != (projection_bias is None):
        raise ValueError(
            "`kernel` and `projection_bias` go together; received "
            f"kernel={'None' if kernel is None else 'a tensor'} and "
            f"projection_bias="
            f"{'None' if projection_bias is None else 'a tensor'}."
        )
    tensors = [tf.convert_to_tensor(t) for t in (hidden_u, bias_u)]
    tensors += [tf.convert_to_tensor(t) for t in (product, bias)]
    has_attention = attention is not None
    has_projection = kernel is not None
    if has_attention:
        tensors.append(tf.convert_to_tensor(attention))
    if has_projection:
        tensors += [tf.convert_to_tensor(t) for t in (kernel, projection_bias)]
    functions = _gate_functions()

    @tf.autograph.experimental.do_not_convert
    @tf.custom_gradient
    def gate(hidden_u, bias_u, product, bias, *rest):
        rest = list(rest)
        attention = rest.pop(0) if has_attention else None
        output = functions.gelu_gate(hidden_u, bias_u, product, bias, attention)
        if has_projection:
            output = _project(output, *rest)

        def backward(upstream):
            by_projection = []
            by_gated = upstream
            if has_projection:
                by_gated = _projected_gradient(upstream, rest[0], product)
            gated, by_hidden_u, by_bias_u, by_mixed, by_bias = (
                functions.gelu_gate_gradient(
                    hidden_u,
                    bias_u,
                    product,
                    bias,
                    attention,
                    by_gated,
                    has_projection,
                )
            )
            if has_projection:
                by_projection = _projection_gradients(gated[0], upstream)
            by_attention = [by_mixed] if has_attention else []
            return [
                by_hidden_u,
                by_bias_u,
                by_mixed,
                by_bias,
                *by_attention,
                *by_projection,
            ]

        return output, backward

    return gate(*tensors)


def _float32_sum(x, axis, dtype):
    """`x` summed over `axis` in float32, in `dtype`."""
    return tf.cast(tf.reduce_sum(widened(x), axis=axis), dtype)


def _project(gated, kernel, bias):
    """`gated @ kernel + bias` over the last axis: the rows' `MatMul`, the
    bias added to its 3-D result (as Keras' Dense adds it: Grappler would
    fuse a 2-D `MatMul` and its bias into oneDNN's `inner_product`, which
    in bfloat16 does not run on AMX)."""
    rows = tf.reshape(gated, (-1, gated.shape[-1]))
    shape = tf.concat([tf.shape(gated)[:-1], tf.shape(kernel)[-1:]], 0)
    outputs = tf.reshape(tf.matmul(rows, kernel), shape)
    outputs.set_shape(gated.shape[:-1] + (kernel.shape[-1],))
    return outputs + bias


def _projected_gradient(upstream, kernel, like):
    """The gradient of `_project`'s input for `upstream`, its output's:
    `upstream @ kernel^T` over the rows, in `like`'s shape."""
    rows = tf.reshape(upstream, (-1, upstream.shape[-1]))
    by_rows = tf.matmul(rows, kernel, transpose_b=True)
    return tf.reshape(by_rows, tf.shape(like))


def _projection_gradients(gated, upstream):
    """`[kernel's, bias's]` gradients of `_project` of `gated` for
    `upstream`: its rows' product, and the upstream rows' sum in float32."""
    rows = tf.reshape(upstream, (-1, upstream.shape[-1]))
    gated_rows = tf.reshape(gated, (-1, gated.shape[-1]))
    return [
        tf.matmul(gated_rows, rows, transpose_a=True),
        _float32_sum(rows, [0], rows.dtype),
    ]


class _GateFunctions:
    """The gates' XLA functions: for the recomputing gate
    (`recomputed_spatial_gate`) the unit's own GELU and LayerNormalization
    functions, forward and backward, and one for the gated half; for the
    inference gate (`inference_spatial_gate`) one for each half."""

    def __init__(self, mean_rows=row_mean):
        gelu = _tensorflow_gelu()
        layer_norm = _tensorflow_layer_norm(column_sum, mean_rows)
        self.gelu = gelu.forward
        self.gelu_gradient = gelu.backward
        self.biased_gelu_gradient = gelu.backward_with_bias
        self.layer_norm = layer_norm.forward
        self.layer_norm_gradient = layer_norm.backward
        cdf_and_density = _tensorflow_cdf_and_density

        @tf.function(jit_compile=True, autograph=False)
        def gated_half(hidden_u, mixed, by_gated, with_gated, with_bias):
            """`(u * mixed,)` if `with_gated`, then the gradients of
            `mixed` and `hidden_u` for `by_gated`, the gated output's, and
            if `with_bias` the latter's sum over the rows (its bias's).
            Rounded to the dtype where the unit's usual call rounds."""
            dtype = hidden_u.dtype
            y = widened(hidden_u)
            cdf, density = cdf_and_density(y)
            u = widened(tf.cast(y * cdf, dtype))
            product = widened(mixed)
            upstream = widened(by_gated)
            by_mixed = tf.cast(upstream * u, dtype)
            by_u = widened(tf.cast(upstream * product, dtype))
            by_hidden_u = tf.cast(by_u * (cdf + y * density), dtype)
            gated = (tf.cast(u * product, dtype),) if with_gated else ()
            by_bias = (
                (tf.cast(column_sum(widened(by_hidden_u)), dtype),)
                if with_bias
                else ()
            )
            return (*gated, by_mixed, by_hidden_u, *by_bias)

        self.gated_half = gated_half

        def biased_gelu(hidden, bias):
            """The GELU of `hidden + bias`, the sum and the GELU rounded
            to `hidden`'s dtype, in float32 at least."""
            y = widened(hidden + bias)
            return widened(tf.cast(y * cdf_and_density(y)[0], hidden.dtype))

        @tf.function(jit_compile=True, autograph=False)
        def normalized_gelu(hidden_v, bias_v, gamma, beta, epsilon):
            """The norm of the GELU of `hidden_v + bias_v`."""
            v = tf.cast(biased_gelu(hidden_v, bias_v), hidden_v.dtype)
            return tensorflow_affine_normalized(
                v, gamma, beta, epsilon, mean_rows
            )

        @tf.function(jit_compile=True, autograph=False)
        def normalized_gelu_gradient(hidden_v, bias_v, gamma, epsilon, by_z):
            """`normalized_gelu`'s gradients for `by_z`, its output's: of
            `hidden_v`, of `bias_v`, of `gamma` and of `beta`, the GELU
            recomputed."""
            dtype = hidden_v.dtype
            y = widened(hidden_v + bias_v)
            cdf, density = cdf_and_density(y)
            v = tf.cast(y * cdf, dtype)
            by_v, by_gamma, by_beta = layer_norm.backward(
                v, gamma, epsilon, by_z
            )
            by_hidden_v = tf.cast(widened(by_v) * (cdf + y * density), dtype)
            by_bias_v = tf.cast(column_sum(widened(by_hidden_v)), dtype)
            return by_hidden_v, by_bias_v, by_gamma, by_beta

        def mixed_sum(product, bias, attention):
            """`product + b [+ attention]`, each sum rounded to the
            product's dtype, widened."""
            dtype = product.dtype
            mixed = tf.cast(product + bias[:, None], dtype)
            if attention is not None:
                mixed = tf.cast(mixed + attention, dtype)
            return widened(mixed)

        @tf.function(jit_compile=True, autograph=False)
        def gelu_gate(hidden_u, bias_u, product, bias, attention):
            """The GELU of `hidden_u + bias_u` times `product + b [+
            attention]`, `b` along the token axis."""
            mixed = mixed_sum(product, bias, attention)
            u = biased_gelu(hidden_u, bias_u)
            return tf.cast(u * mixed, product.dtype)

        @tf.function(jit_compile=True, autograph=False)
        def gelu_gate_gradient(
            hidden_u, bias_u, product, bias, attention, by_gated, with_gated
        ):
            """`(gated,)` (`gelu_gate`'s output again) if `with_gated`,
            else `()`, then `gelu_gate`'s gradients for `by_gated`, the
            gated output's: of `hidden_u`, of `bias_u`, of the product
            (and `attention`) and of `b`. The biases' sum the rounded
            gradients in float32, `b`'s over the channels as a product
            with ones."""
            dtype = product.dtype
            y = widened(hidden_u + bias_u)
            cdf, density = cdf_and_density(y)
            u = widened(tf.cast(y * cdf, dtype))
            upstream = widened(by_gated)
            by_mixed = tf.cast(upstream * u, dtype)
            mixed = mixed_sum(product, bias, attention)
            by_u = widened(tf.cast(upstream * mixed, dtype))
            by_hidden_u = tf.cast(by_u * (cdf + y * density), dtype)
            by_bias_u = column_sum(widened(by_hidden_u))
            channels = by_mixed.shape[-1]
            rows = tf.reshape(widened(by_mixed), (-1, channels))
            by_rows = tf.matmul(rows, tf.ones((channels, 1), rows.dtype))
            by_tokens = tf.reshape(by_rows, tf.shape(by_mixed)[:-1])
            by_bias = tf.reduce_sum(by_tokens, 0)
            gated = (tf.cast(u * mixed, dtype),) if with_gated else ()
            return (
                gated,
                by_hidden_u,
                tf.cast(by_bias_u, dtype),
                by_mixed,
                tf.cast(by_bias, dtype),
            )

        self.normalized_gelu = normalized_gelu
        self.gelu_gate = gelu_gate
        self.gelu_gate_gradient = gelu_gate_gradient
        self.normalized_gelu_gradient = normalized_gelu_gradient


@functools.cache
def _gate_functions(mean_rows=row_mean):
    return _GateFunctions(mean_rows)
