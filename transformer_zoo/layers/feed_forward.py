"""The position-wise feed-forward network (paper §3.3)."""

from __future__ import annotations

import keras

from transformer_zoo.layers.activations import get_activation
from transformer_zoo.layers.initializers import clone_initializer
from transformer_zoo.layers.validation import check_flag, check_rate, check_size


@keras.saving.register_keras_serializable(package="transformer_zoo")
class FeedForward(keras.layers.Layer):
    """FFN(x) = act(x W₁ + b₁) W₂ + b₂, then dropout (paper §3.3, eq. 2).

    Args:
        intermediate_dim: d_ff, the hidden width (2048 in the base model).
        activation: `"relu"` (paper), `"gelu"` (exact, written with erf; BERT),
            `"gelu_tanh"` (GPT-2) or `"swish"` (Marian).
        dropout: dropout rate on the output (the paper's residual dropout, §5.4).
        use_bias: whether both projections have biases.
        kernel_initializer: initializer of both kernels.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: (B, T, D).
        training: whether dropout is active.

    Returns:
        (B, T, D), carrying the Keras mask of `inputs` on.

    Example:
    >>> ffn = FeedForward(intermediate_dim=32)
    >>> tuple(ffn(keras.ops.ones((2, 3, 8))).shape)
    (2, 3, 8)
    """

    def __init__(
        self,
        intermediate_dim: int,
        activation: str = "relu",
        dropout: float = 0.0,
        use_bias: bool = True,
        kernel_initializer: str | keras.initializers.Initializer = "glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.intermediate_dim = check_size("intermediate_dim", intermediate_dim)
        self._activation_fn = get_activation(activation)
        self.activation = activation
        self.dropout = check_rate("dropout", dropout)
        self.use_bias = check_flag("use_bias", use_bias)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy)
        # Position-wise, like a Dense: the Keras mask of `inputs` (padding) passes through
        # to the attention and the loss after it.
        self.supports_masking = True

    def build(self, inputs_shape):
        self.intermediate_dense = keras.layers.Dense(
            self.intermediate_dim,
            use_bias=self.use_bias,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name="intermediate",
        )
        self.intermediate_dense.build(inputs_shape)
        self.output_dense = keras.layers.Dense(
            inputs_shape[-1],
            use_bias=self.use_bias,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name="output",
        )
        self.output_dense.build(tuple(inputs_shape[:-1]) + (self.intermediate_dim,))
        self.built = True

    def call(self, inputs, training=None):
        hidden = self._activation_fn(self.intermediate_dense(inputs))  # (B, T, d_ff)
        return self.dropout_layer(self.output_dense(hidden), training=training)  # (B, T, D)

    def compute_output_shape(self, inputs_shape):
        return tuple(inputs_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "intermediate_dim": self.intermediate_dim,
                "activation": self.activation,
                "dropout": self.dropout,
                "use_bias": self.use_bias,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
