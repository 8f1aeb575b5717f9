"""Calling a built sublayer without `Layer.__call__`."""

import functools

import keras

# The autocast scope Layer.__call__ opens for a mixed dtype policy; Keras
# does not export it.
from keras.src.backend import AutocastScope
from keras.src.backend import get_autocast_scope


def direct_call(layer, inputs, method="call", **kwargs):
    """`layer(inputs, **kwargs)` through `layer.call`, for a built layer.

    Under eager torch, `Layer.__call__`'s bookkeeping (signature binding,
    name scopes, masks, tracking) costs about 150 us a call: 4 times the
    computation of a `(1, 1, 128)` Dense or LayerNormalization in decoding
    (`benchmarks/generation.py`), and the gMLP block calls 5 sublayers a
    step. This does what `__call__` does to the numbers and nothing else:
    the inputs (and the tensors among the keyword arguments) converted by
    the layer's dtype policy, and the autocast scope `__call__` would
    enter (the variables cast to the compute dtype under a mixed policy).
    So the outputs are the same as the layer's own call's, for layers
    whose `call` reads no mask and is given its `training` flag, if it
    takes one, explicitly. A layer not built yet (which this call
    builds), a quantized layer and symbolic inputs go through
    `layer(...)` as usual.

    Args:
        layer: a `keras.layers.Layer`.
        inputs: a tensor, the layer's first call argument.
        method: str or function. The name of the method called, `"call"`
            or another of the layer's methods, or a function of the layer
            and the arguments that computes as its `call` does (a kernel);
            only a built layer's `call` falls back to `layer(...)`.
        **kwargs: further arguments of the method.

    Example:

    >>> from keras_gmlp.kernels.direct_call import direct_call
    >>> dense = keras.layers.Dense(4)
    >>> x = keras.ops.ones((1, 3))
    >>> bool(keras.ops.all(direct_call(dense, x) == dense(x)))
    True
    """
    if method == "call" and (
        not layer.built
        or getattr(layer, "quantization_mode", None) is not None
        or isinstance(inputs, keras.KerasTensor)
    ):
        return layer(inputs, **kwargs)
    policy = layer.dtype_policy
    inputs = policy.convert_input(inputs, layer.autocast, layer.input_dtype)
    kwargs = {
        name: policy.convert_input(value, layer.autocast, layer.input_dtype)
        for name, value in kwargs.items()
    }
    if callable(method):
        function = functools.partial(method, layer)
    else:
        function = getattr(layer, method)
    scope = autocast_scope(layer)
    if scope is None:
        return function(inputs, **kwargs)
    with scope:
        return function(inputs, **kwargs)


def autocast_scope(layer):
    """The autocast scope `Layer.__call__` would enter for `layer`, or
    `None` where it would keep the current one."""
    dtype = layer.compute_dtype
    current = get_autocast_scope()
    if current is not None:
        if not layer.autocast or not keras.backend.is_float_dtype(dtype):
            return AutocastScope(None)
        if current.dtype != dtype:
            return AutocastScope(dtype)
        return None
    if dtype != layer.variable_dtype:
        return AutocastScope(dtype)
    return None
