"""The catalog of every public ``keras.layers`` class (Keras 3.15): how to build and call each.

Conventions the probe relies on:

* ``kwargs`` hold JSON values only. A layer that needs a sub-layer (``Bidirectional``,
  ``TimeDistributed``, ``RNN``, ``SpectralNormalization``, ``StackedRNNCells``, ``Pipeline``)
  gets it as a Keras serialized config, ``{"module": "keras.layers", "class_name": ...,
  "config": {...}}`` (see ``sublayer``). ``build_kwargs`` turns every such dict, also inside
  lists, into a layer with ``keras.layers.deserialize``; call it *after* the probe's dtype
  policy is in place, so the sub-layer picks the policy up like its wrapper does.
* ``index`` inputs are integers in ``range(INDEX_HIGH)``; every entry accepts them
  (embedding sizes, vocabularies and token counts are at least ``INDEX_HIGH``).
* ``positional`` entries are called ``layer(*inputs)``: attention layers take
  ``(query, value)`` and RNN cells ``(inputs, states)``. ``LSTMCell`` reads its two states as
  ``states[0]`` and ``states[1]``, so one tensor of shape ``(2, batch, units)`` holds ``[h, c]``;
  ``StackedRNNCells`` zips its cells with ``states``, so shape ``(n_cells, batch, units)``.
  Cells return ``(output, new_states)``: the probe reads the first output.
* ``string`` inputs are passed as nested Python lists of ``str``, as Keras's own tests do:
  ``Layer.__call__`` rejects NumPy object and unicode arrays ("Invalid dtype") on every
  backend but TensorFlow.
* Layers whose ``call`` takes ``training`` are called with Keras's default: augmentation layers
  (default ``training=True``) augment; dropout and noise layers (default ``False``) do not.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from dtype_explorer.keras_run.catalog._entries import LayerEntry

#: Exclusive upper bound of the values given to ``index`` inputs.
INDEX_HIGH = 8


def sublayer(class_name: str, **config: Any) -> dict[str, Any]:
    """A built-in layer as the JSON config ``keras.layers.deserialize`` accepts."""
    return {"module": "keras.layers", "class_name": class_name, "config": config}


@contextlib.contextmanager
def safe_deserialization() -> Iterator[None]:
    """Keras's safe mode forced on (no Python lambdas or marshalled code are deserialized),
    whatever this session set with ``keras.config.enable_unsafe_deserialization()``; the
    session's setting is put back on exit. Kwargs come from specs and from the widget's page:
    they are data, never code.

    >>> import keras
    >>> from keras.src.saving import serialization_lib
    >>> keras.config.enable_unsafe_deserialization()
    >>> with safe_deserialization():
    ...     serialization_lib.in_safe_mode()
    True
    >>> serialization_lib.in_safe_mode()
    False
    >>> serialization_lib.global_state.set_global_attribute("safe_mode_saving", None)
    """
    from keras.src.saving import serialization_lib

    with serialization_lib.SafeModeScope(True):
        yield


def build_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` with every serialized sub-layer (a dict with ``class_name``) deserialized,
    in Keras's safe mode (``safe_deserialization``)."""
    import keras

    def build(value: Any) -> Any:
        if isinstance(value, dict) and "class_name" in value:
            return keras.layers.deserialize(value)
        if isinstance(value, list):
            return [build(v) for v in value]
        return value

    with safe_deserialization():
        return {key: build(value) for key, value in kwargs.items()}


def _layer(name: str, group: str, contract: str, *shapes: tuple[int, ...], **fields: Any):
    return LayerEntry(name, group, contract, shapes=shapes or ((2, 4),), **fields)


_S1 = (2, 5, 3)  # (batch, steps, channels)
_S2 = (2, 5, 5, 3)  # (batch, height, width, channels)
_S3 = (2, 4, 4, 4, 3)  # (batch, depth, height, width, channels)
_SEQ = (2, 3, 4)  # (batch, timesteps, features)
_IMG = (2, 8, 8, 3)  # a batch of two small RGB images
_PAIR = ((2, 4), (2, 4))
_QV = ((2, 3, 4), (2, 5, 4))  # (query, value)
_VOCAB = ["red", "green", "blue", "cyan"]  # the words dtypes.sample("string", ...) draws
_CONV = {"filters": 2, "kernel_size": 2}
_NO_JSON = "its argument is a Python object, not a JSON value: probe it as a custom layer"

LAYERS: tuple[LayerEntry, ...] = (
    # core
    _layer("Dense", "core", "compute", kwargs={"units": 4}),
    _layer("EinsumDense", "core", "compute", kwargs={"equation": "ab,bc->ac", "output_shape": 4}),
    _layer(
        "Embedding",
        "core",
        "layer-dtype",
        (2, 3),
        roles=("index",),
        kwargs={"input_dim": INDEX_HIGH, "output_dim": 4},
        note="autocast off; casts indices to int32 and the output to the compute dtype",
    ),
    _layer(
        "ReversibleEmbedding",
        "core",
        "layer-dtype",
        (2, 3),
        roles=("index",),
        kwargs={"input_dim": INDEX_HIGH, "output_dim": 4},
        note="forward mode (reverse=False): an Embedding lookup",
    ),
    _layer("Identity", "core", "passthrough"),
    _layer("Masking", "core", "passthrough", _SEQ),
    _layer("Lambda", "core", "passthrough", skip=f"wraps a Python function; {_NO_JSON}"),
    _layer(
        "InputLayer",
        "core",
        "passthrough",
        skip="not called on tensors: it makes the symbolic input of a Functional model",
    ),
    # convolution
    _layer("Conv1D", "convolution", "compute", _S1, kwargs=_CONV, aliases=("Convolution1D",)),
    _layer(
        "Conv1DTranspose",
        "convolution",
        "compute",
        _S1,
        kwargs=_CONV,
        aliases=("Convolution1DTranspose",),
    ),
    _layer("Conv2D", "convolution", "compute", _S2, kwargs=_CONV, aliases=("Convolution2D",)),
    _layer(
        "Conv2DTranspose",
        "convolution",
        "compute",
        _S2,
        kwargs=_CONV,
        aliases=("Convolution2DTranspose",),
    ),
    _layer("Conv3D", "convolution", "compute", _S3, kwargs=_CONV, aliases=("Convolution3D",)),
    _layer(
        "Conv3DTranspose",
        "convolution",
        "compute",
        _S3,
        kwargs=_CONV,
        aliases=("Convolution3DTranspose",),
    ),
    _layer("DepthwiseConv1D", "convolution", "compute", _S1, kwargs={"kernel_size": 2}),
    _layer("DepthwiseConv2D", "convolution", "compute", _S2, kwargs={"kernel_size": 2}),
    _layer(
        "SeparableConv1D",
        "convolution",
        "compute",
        _S1,
        kwargs=_CONV,
        aliases=("SeparableConvolution1D",),
    ),
    _layer(
        "SeparableConv2D",
        "convolution",
        "compute",
        _S2,
        kwargs=_CONV,
        aliases=("SeparableConvolution2D",),
    ),
    # pooling
    _layer(
        "AveragePooling1D",
        "pooling",
        "passthrough",
        _S1,
        kwargs={"pool_size": 2},
        aliases=("AvgPool1D",),
    ),
    _layer(
        "AveragePooling2D",
        "pooling",
        "passthrough",
        _S2,
        kwargs={"pool_size": 2},
        aliases=("AvgPool2D",),
    ),
    _layer(
        "AveragePooling3D",
        "pooling",
        "passthrough",
        _S3,
        kwargs={"pool_size": 2},
        aliases=("AvgPool3D",),
    ),
    _layer("MaxPooling1D", "pooling", "passthrough", _S1, aliases=("MaxPool1D",)),
    _layer("MaxPooling2D", "pooling", "passthrough", _S2, aliases=("MaxPool2D",)),
    _layer("MaxPooling3D", "pooling", "passthrough", _S3, aliases=("MaxPool3D",)),
    _layer("GlobalAveragePooling1D", "pooling", "passthrough", _S1, aliases=("GlobalAvgPool1D",)),
    _layer("GlobalAveragePooling2D", "pooling", "passthrough", _S2, aliases=("GlobalAvgPool2D",)),
    _layer("GlobalAveragePooling3D", "pooling", "passthrough", _S3, aliases=("GlobalAvgPool3D",)),
    _layer("GlobalMaxPooling1D", "pooling", "passthrough", _S1, aliases=("GlobalMaxPool1D",)),
    _layer("GlobalMaxPooling2D", "pooling", "passthrough", _S2, aliases=("GlobalMaxPool2D",)),
    _layer("GlobalMaxPooling3D", "pooling", "passthrough", _S3, aliases=("GlobalMaxPool3D",)),
    _layer("AdaptiveAveragePooling1D", "pooling", "passthrough", _S1, kwargs={"output_size": 2}),
    _layer("AdaptiveAveragePooling2D", "pooling", "passthrough", _S2, kwargs={"output_size": 2}),
    _layer("AdaptiveAveragePooling3D", "pooling", "passthrough", _S3, kwargs={"output_size": 2}),
    _layer("AdaptiveMaxPooling1D", "pooling", "passthrough", _S1, kwargs={"output_size": 2}),
    _layer("AdaptiveMaxPooling2D", "pooling", "passthrough", _S2, kwargs={"output_size": 2}),
    _layer("AdaptiveMaxPooling3D", "pooling", "passthrough", _S3, kwargs={"output_size": 2}),
    # normalization
    _layer(
        "BatchNormalization",
        "normalization",
        "self-managed",
        note="math in result_type(input, float32); output cast to the compute dtype",
    ),
    _layer(
        "LayerNormalization",
        "normalization",
        "self-managed",
        note="autocast off; float32 math; output cast to the compute dtype",
    ),
    _layer(
        "GroupNormalization",
        "normalization",
        "self-managed",
        kwargs={"groups": 2},
        note="autocast off; math in result_type(input, float32); output cast to compute dtype",
    ),
    _layer(
        "RMSNormalization",
        "normalization",
        "passthrough",
        note="math in result_type(input, float32); the result is cast back to the input dtype",
    ),
    _layer("UnitNormalization", "normalization", "passthrough"),
    _layer(
        "SpectralNormalization",
        "normalization",
        "passthrough",
        kwargs={"layer": sublayer("Dense", units=4)},
        note="wraps a Dense given as a serialized sub-layer; casts its output to the input dtype",
    ),
    # recurrent
    _layer("SimpleRNN", "recurrent", "compute", _SEQ, kwargs={"units": 4}),
    _layer("GRU", "recurrent", "compute", _SEQ, kwargs={"units": 4}),
    _layer("LSTM", "recurrent", "compute", _SEQ, kwargs={"units": 4}),
    _layer("ConvLSTM1D", "recurrent", "compute", (2, 3, 5, 3), kwargs=_CONV),
    _layer("ConvLSTM2D", "recurrent", "compute", (2, 3, 5, 5, 3), kwargs=_CONV),
    _layer("ConvLSTM3D", "recurrent", "compute", (2, 3, 4, 4, 4, 3), kwargs=_CONV),
    _layer(
        "RNN",
        "recurrent",
        "compute",
        _SEQ,
        kwargs={"cell": sublayer("LSTMCell", units=4)},
        note="runs an LSTMCell given as a serialized sub-layer",
    ),
    # rnn-cells: called (inputs, states); they return (output, new_states)
    _layer(
        "SimpleRNNCell",
        "rnn-cells",
        "compute",
        (2, 3),
        (2, 4),
        roles=("float", "float"),
        kwargs={"units": 4},
        input_style="positional",
        batch_axes=(0, -2),
        note="called cell(inputs, state); returns (output, new_state)",
    ),
    _layer(
        "GRUCell",
        "rnn-cells",
        "compute",
        (2, 3),
        (2, 4),
        roles=("float", "float"),
        kwargs={"units": 4},
        input_style="positional",
        batch_axes=(0, -2),
        note="called cell(inputs, state); returns (output, new_state)",
    ),
    _layer(
        "LSTMCell",
        "rnn-cells",
        "compute",
        (2, 3),
        (2, 2, 4),
        roles=("float", "float"),
        kwargs={"units": 4},
        input_style="positional",
        batch_axes=(0, -2),
        note="called cell(inputs, states) with states [h, c] stacked as one (2, batch, units) "
        "tensor; returns (output, [h, c])",
    ),
    _layer(
        "StackedRNNCells",
        "rnn-cells",
        "compute",
        (2, 3),
        (1, 2, 4),
        roles=("float", "float"),
        kwargs={"cells": [sublayer("SimpleRNNCell", units=4)]},
        input_style="positional",
        batch_axes=(0, -2),
        note="one SimpleRNNCell; states stacked as one (n_cells, batch, units) tensor",
    ),
    # attention
    _layer(
        "Attention",
        "attention",
        "passthrough",
        *_QV,
        roles=("float", "float"),
        input_style="list",
        note="called layer([query, value])",
    ),
    _layer(
        "AdditiveAttention",
        "attention",
        "compute",
        *_QV,
        roles=("float", "float"),
        input_style="list",
        note="called layer([query, value]); has a float `scale` weight",
    ),
    _layer(
        "MultiHeadAttention",
        "attention",
        "compute",
        *_QV,
        roles=("float", "float"),
        kwargs={"num_heads": 2, "key_dim": 2},
        input_style="positional",
        note="called layer(query, value)",
    ),
    _layer(
        "GroupQueryAttention",
        "attention",
        "compute",
        *_QV,
        roles=("float", "float"),
        kwargs={"head_dim": 2, "num_query_heads": 2, "num_key_value_heads": 1},
        input_style="positional",
        note="called layer(query, value)",
    ),
    # merging: called layer([x1, x2])
    *(
        _layer(name, "merging", "passthrough", *_PAIR, roles=("float", "float"), input_style="list")
        for name in ("Add", "Subtract", "Multiply", "Average", "Maximum", "Minimum", "Concatenate")
    ),
    _layer(
        "Dot",
        "merging",
        "passthrough",
        *_PAIR,
        roles=("float", "float"),
        kwargs={"axes": 1},
        input_style="list",
    ),
    # reshaping
    _layer("Flatten", "reshaping", "passthrough", _SEQ),
    _layer("Reshape", "reshaping", "passthrough", kwargs={"target_shape": [2, 2]}),
    _layer("Permute", "reshaping", "passthrough", _SEQ, kwargs={"dims": [2, 1]}),
    _layer("RepeatVector", "reshaping", "passthrough", kwargs={"n": 2}),
    _layer("Cropping1D", "reshaping", "passthrough", _S1),
    _layer("Cropping2D", "reshaping", "passthrough", _S2, kwargs={"cropping": 1}),
    _layer("Cropping3D", "reshaping", "passthrough", _S3),
    _layer("UpSampling1D", "reshaping", "passthrough", _S1),
    _layer("UpSampling2D", "reshaping", "passthrough", _S2),
    _layer("UpSampling3D", "reshaping", "passthrough", _S3),
    _layer("ZeroPadding1D", "reshaping", "passthrough", _S1),
    _layer("ZeroPadding2D", "reshaping", "passthrough", _S2),
    _layer("ZeroPadding3D", "reshaping", "passthrough", _S3),
    # regularization: identity at inference (Keras's default training=False)
    _layer("Dropout", "regularization", "passthrough", kwargs={"rate": 0.5}),
    _layer("AlphaDropout", "regularization", "passthrough", kwargs={"rate": 0.5}),
    _layer("GaussianDropout", "regularization", "passthrough", kwargs={"rate": 0.5}),
    _layer("GaussianNoise", "regularization", "passthrough", kwargs={"stddev": 0.1}),
    _layer("SpatialDropout1D", "regularization", "passthrough", _S1, kwargs={"rate": 0.5}),
    _layer("SpatialDropout2D", "regularization", "passthrough", _S2, kwargs={"rate": 0.5}),
    _layer("SpatialDropout3D", "regularization", "passthrough", _S3, kwargs={"rate": 0.5}),
    _layer("ActivityRegularization", "regularization", "passthrough"),
    # activation
    _layer("Activation", "activation", "passthrough", kwargs={"activation": "relu"}),
    _layer("ReLU", "activation", "passthrough"),
    _layer("LeakyReLU", "activation", "passthrough"),
    _layer("ELU", "activation", "passthrough"),
    _layer("Softmax", "activation", "passthrough"),
    _layer("PReLU", "activation", "compute", note="has a float `alpha` weight"),
    # preprocessing-numerical
    _layer(
        "Normalization",
        "preprocessing-numerical",
        "compute",
        kwargs={"mean": 0.0, "variance": 1.0},
        note="mean and variance given, so no adapt() is needed",
    ),
    _layer(
        "Discretization",
        "preprocessing-numerical",
        "own-output",
        kwargs={"bin_boundaries": [0.0, 1.0]},
        note="output_mode='int' returns int32 bin indices (Discretization.output_dtype)",
    ),
    # preprocessing-categorical
    _layer(
        "CategoryEncoding",
        "preprocessing-categorical",
        "layer-dtype",
        (2, 3),
        roles=("index",),
        kwargs={"num_tokens": INDEX_HIGH, "output_mode": "multi_hot"},
        note="no input conversion; call() uses the variable dtype (self.dtype), so mixed "
        "policies give float32 while compute_output_spec declares the compute dtype",
    ),
    _layer(
        "Hashing",
        "preprocessing-categorical",
        "layer-dtype",
        (2, 3),
        roles=("index",),
        kwargs={"num_bins": 4},
        note="output_mode='int' makes the layer dtype int64 unless dtype= is given",
    ),
    _layer(
        "HashedCrossing",
        "preprocessing-categorical",
        "layer-dtype",
        (2,),
        (2,),
        roles=("index", "index"),
        kwargs={"num_bins": 4},
        input_style="list",
        note="called layer([feature1, feature2]); output_mode='int' makes the dtype int64",
    ),
    _layer(
        "IntegerLookup",
        "preprocessing-categorical",
        "own-output",
        (2, 3),
        roles=("index",),
        kwargs={"vocabulary": list(range(1, INDEX_HIGH))},
        note="compute dtype is the vocabulary dtype 'int64', whatever the policy; "
        "compute_output_spec declares int64 indices for output_mode='int', floatx otherwise",
    ),
    _layer(
        "StringLookup",
        "preprocessing-categorical",
        "own-output",
        (2, 3),
        roles=("string",),
        kwargs={"vocabulary": _VOCAB},
        note="compute dtype is the vocabulary dtype 'string'; output_mode='int' returns "
        "int64 indices",
    ),
    # preprocessing-text
    _layer(
        "TextVectorization",
        "preprocessing-text",
        "own-output",
        (2,),
        roles=("string",),
        kwargs={"vocabulary": _VOCAB},
        note="compute dtype is 'string'; output_mode='int' returns int64 token indices",
    ),
    # preprocessing-audio
    _layer(
        "MelSpectrogram",
        "preprocessing-audio",
        "compute",
        (2, 64),
        kwargs={
            "fft_length": 16,
            "sequence_stride": 8,
            "num_mel_bins": 4,
            "sampling_rate": 8000,
        },
    ),
    _layer(
        "STFTSpectrogram",
        "preprocessing-audio",
        "compute",
        (2, 64, 1),
        kwargs={"frame_length": 16, "frame_step": 8, "fft_length": 16},
        note="raises TypeError unless the input is float16, float32 or float64",
    ),
    # preprocessing-image
    _layer(
        "Rescaling",
        "preprocessing-image",
        "layer-dtype",
        _IMG,
        kwargs={"scale": 1 / 255},
        arithmetic=True,
        note="computes inputs * scale + offset with scale and offset cast to the layer's dtype",
    ),
    _layer(
        "Resizing",
        "preprocessing-image",
        "passthrough",
        _IMG,
        kwargs={"height": 4, "width": 4},
        note="saturate-casts the result back to the input dtype (uint8 stays uint8)",
    ),
    _layer(
        "CenterCrop", "preprocessing-image", "layer-dtype", _IMG, kwargs={"height": 4, "width": 4}
    ),
    _layer(
        "RandomCrop",
        "preprocessing-image",
        "layer-dtype",
        _IMG,
        kwargs={"height": 4, "width": 4},
        note="no input conversion (_convert_input_args=False)",
    ),
    _layer(
        "RandomFlip",
        "preprocessing-image",
        "layer-dtype",
        _IMG,
        note="no input conversion (_convert_input_args=False)",
    ),
    _layer("RandomRotation", "preprocessing-image", "layer-dtype", _IMG, kwargs={"factor": 0.1}),
    _layer(
        "RandomTranslation",
        "preprocessing-image",
        "layer-dtype",
        _IMG,
        kwargs={"height_factor": 0.1, "width_factor": 0.1},
    ),
    _layer("RandomZoom", "preprocessing-image", "layer-dtype", _IMG, kwargs={"height_factor": 0.1}),
    _layer("RandomShear", "preprocessing-image", "layer-dtype", _IMG, kwargs={"x_factor": 0.1}),
    _layer("RandomPerspective", "preprocessing-image", "layer-dtype", _IMG),
    _layer("RandomElasticTransform", "preprocessing-image", "layer-dtype", _IMG),
    _layer("RandomContrast", "preprocessing-image", "layer-dtype", _IMG, kwargs={"factor": 0.5}),
    _layer(
        "RandomBrightness",
        "preprocessing-image",
        "passthrough",
        _IMG,
        kwargs={"factor": 0.1},
        note="adds a delta cast to the image dtype",
    ),
    _layer(
        "RandomColorDegeneration",
        "preprocessing-image",
        "layer-dtype",
        _IMG,
        kwargs={"factor": 0.5},
    ),
    _layer("RandomColorJitter", "preprocessing-image", "layer-dtype", _IMG),
    _layer("RandomHue", "preprocessing-image", "layer-dtype", _IMG, kwargs={"factor": 0.5}),
    _layer(
        "RandomSaturation",
        "preprocessing-image",
        "passthrough",
        _IMG,
        kwargs={"factor": 0.5},
        note="images are not cast; integer images raise 'expected float dtype'",
    ),
    _layer("RandomSharpness", "preprocessing-image", "layer-dtype", _IMG, kwargs={"factor": 0.5}),
    _layer("RandomPosterization", "preprocessing-image", "layer-dtype", _IMG, kwargs={"factor": 4}),
    _layer("RandomGrayscale", "preprocessing-image", "passthrough", _IMG),
    _layer("RandomInvert", "preprocessing-image", "layer-dtype", _IMG),
    _layer("RandomErasing", "preprocessing-image", "layer-dtype", _IMG),
    _layer("RandomGaussianBlur", "preprocessing-image", "layer-dtype", _IMG),
    _layer("Solarization", "preprocessing-image", "layer-dtype", _IMG),
    _layer("Equalization", "preprocessing-image", "layer-dtype", _IMG),
    _layer(
        "AutoContrast",
        "preprocessing-image",
        "layer-dtype",
        _IMG,
        note="casts images to the compute dtype; its saturate-cast back is never reached",
    ),
    _layer(
        "ContrastLimitedAdaptiveHistogramEqualization",
        "preprocessing-image",
        "passthrough",
        _IMG,
        note="casts the result back to the input dtype",
    ),
    _layer("AugMix", "preprocessing-image", "layer-dtype", _IMG),
    _layer("RandAugment", "preprocessing-image", "layer-dtype", _IMG),
    _layer("CutMix", "preprocessing-image", "layer-dtype", _IMG),
    _layer("MixUp", "preprocessing-image", "layer-dtype", _IMG),
    _layer(
        "MaxNumBoundingBoxes",
        "preprocessing-image",
        "passthrough",
        _IMG,
        kwargs={"max_number": 2},
        note="pads/truncates bounding boxes; images pass through unchanged",
    ),
    # wrappers
    _layer(
        "TimeDistributed",
        "wrappers",
        "compute",
        _SEQ,
        kwargs={"layer": sublayer("Dense", units=4)},
        note="wraps a Dense given as a serialized sub-layer",
    ),
    _layer(
        "Bidirectional",
        "wrappers",
        "compute",
        _SEQ,
        kwargs={"layer": sublayer("LSTM", units=4)},
        note="wraps an LSTM given as a serialized sub-layer",
    ),
    _layer(
        "Wrapper",
        "wrappers",
        "compute",
        skip="abstract base of the wrapper layers: it has no call() of its own",
    ),
    # other
    _layer(
        "Pipeline",
        "other",
        "layer-dtype",
        _IMG,
        kwargs={"layers": [sublayer("Rescaling", scale=1 / 255, offset=0.0)]},
        note="runs a Rescaling given as a serialized sub-layer; no input conversion",
    ),
    _layer(
        "Layer",
        "other",
        "passthrough",
        skip="abstract base class; probe a user layer as 'custom:<Name>'",
    ),
    _layer(
        "TFSMLayer",
        "other",
        "compute",
        skip="loads a TensorFlow SavedModel from disk (filepath); probe it as a custom layer",
    ),
    _layer(
        "JaxLayer",
        "other",
        "compute",
        skip=f"wraps a JAX function (call_fn; jax and tensorflow backends only); {_NO_JSON}",
    ),
    _layer(
        "FlaxLayer",
        "other",
        "compute",
        skip=f"wraps a Flax module and needs flax; {_NO_JSON}",
    ),
    _layer(
        "TorchModuleWrapper",
        "other",
        "compute",
        skip=f"wraps a torch.nn.Module (torch backend only); {_NO_JSON}",
    ),
)
