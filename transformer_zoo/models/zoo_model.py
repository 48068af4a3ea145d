"""What every transformer_zoo model adds to `keras.Model`: quantized `.keras` files,
`export` without a signature, and LoRA (the three Keras features keras-hub's `Backbone`
gives its models)."""

from __future__ import annotations

import keras

from transformer_zoo.layers import MultiHeadAttention


class ZooModel(keras.Model):
    """The base class of the five models.

    - Quantization (`model.quantize("int8" | "int4" | "float8")`): `get_config` stores
      the quantized layers' policies in a `keras.dtype_policies.DTypePolicyMap` keyed by
      layer path, as keras-hub's `Backbone` does. A model built from that config passes
      the map to its sublayers (`dtype=self.dtype_policy`), each of which takes its own
      entry when it is built, so a loaded model has the quantized variables its file holds.
    - `export(path)` needs no `input_signature`: the model's `input_specs()` is the
      signature. Keras infers one only for a subclassed model that recorded its input
      shapes in a first call's `build`; ours are built in `__init__`, and Keras' inferred
      dtype would be the float compute dtype rather than int32 token ids.
    - `enable_lora(rank)` (see there).

    Subclasses define `input_specs()`.
    """

    def input_specs(self) -> dict[str, keras.InputSpec]:
        """The named (B, T) int32 inputs that `call` reads, as `export`'s signature."""
        raise NotImplementedError

    def export(
        self,
        filepath,
        format: str = "tf_saved_model",
        verbose: bool | None = None,
        input_signature=None,
        **kwargs,
    ):
        """`keras.Model.export`; without `input_signature`, one dict argument of
        `input_specs()` (the SavedModel's `serve` takes that dict)."""
        if input_signature is None:
            input_signature = [self.input_specs()]
        return super().export(
            filepath, format=format, verbose=verbose, input_signature=input_signature, **kwargs
        )

    def enable_lora(self, rank: int) -> None:
        """Freeze every weight and add rank-`rank` LoRA (Hu et al. 2021) to the query and
        key-value projections of every attention layer (self- and cross-attention).

        keras-hub adapts the query and value projections; ours computes K and V with one
        fused `key_value` Dense, so its adapter (A: (D, r), B: (r, 2·H·Dh)) adapts keys
        and values together. Biases stay frozen too: only the `lora_kernel_a` and
        `lora_kernel_b` weights train. B starts at zero, so the outputs do not change
        until training. `model.save` merges the adapters into the kernels, as Keras'
        `Dense` does: the loaded model computes the same outputs without LoRA weights.

        Raises:
            ValueError: LoRA is already enabled (Keras' `Dense` adds adapters once); the
                model is left as it was. Save and load it to merge them and start again.
        """
        projections = [
            dense
            for layer in self._sublayers()
            if isinstance(layer, MultiHeadAttention)
            for dense in (layer.query_dense, layer.key_value_dense)
        ]
        adapted = [dense for dense in projections if dense.lora_enabled]
        if adapted:
            # Checked before anything changes: Keras' own error came from the first Dense,
            # after every other layer had been frozen and that one unfrozen, kernel too.
            raise ValueError(
                f"LoRA is already enabled on this model, with rank {adapted[0].lora_rank}: "
                "`enable_lora` adds the adapters once (save and load the model to merge "
                f"them, then enable it again). Received: rank={rank}"
            )
        self.trainable = True
        for layer in self._sublayers():
            layer.trainable = False
        for dense in projections:
            dense.trainable = True
            dense.enable_lora(rank)
            if dense.bias is not None:
                dense.bias.trainable = False

    def get_config(self):
        config = super().get_config()
        policy = self.dtype_policy
        if not isinstance(policy, keras.dtype_policies.DTypePolicyMap):
            # The default is the model's own policy (mixed precision included), which
            # keras-hub's map leaves to the global policy at loading time.
            policies = keras.dtype_policies.DTypePolicyMap(default_policy=policy)
            for layer in self._sublayers():
                if layer.quantization_mode is not None:
                    policies[layer.path] = _own_policy(layer)
            if len(policies) > 0:
                config["dtype"] = keras.dtype_policies.serialize(policies)
        return config

    def layer_dtypes(self) -> tuple[tuple[str, str | None], ...]:
        """Each layer's compute dtype and quantization mode, the model's first: what a
        graph traced now fixes of its layers besides its variables (`generate` traces its
        step graphs again when these or the variables change)."""
        layers = [self, *self._sublayers()]
        return tuple((layer.compute_dtype, layer.quantization_mode) for layer in layers)

    def _sublayers(self) -> list[keras.layers.Layer]:
        """Every layer inside the model, nested ones too. Keras has no public list of
        them; `_flatten_layers` is what `Model.quantize`, keras-hub's `Backbone` and the
        `DTypePolicyMap` docstring's own example use."""
        return list(self._flatten_layers(include_self=False))


def _own_policy(layer) -> keras.DTypePolicy:
    """The layer's own policy: its entry when it holds a map (a loaded quantized model)."""
    policy = layer.dtype_policy
    if isinstance(policy, keras.dtype_policies.DTypePolicyMap):
        return policy[layer.path]
    return policy
