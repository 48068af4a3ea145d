"""Initializer helpers shared by the layers."""

from __future__ import annotations

import keras


def clone_initializer(initializer):
    """A fresh copy of `initializer` for one more weight.

    Keras 3 initializers without a seed return the same values on every call, so one
    instance shared by several weights of one shape (W_Q and W_O, say) would start them
    identical. Each weight gets its own copy; a seeded initializer keeps its seed.
    """
    initializer = keras.initializers.get(initializer)
    return initializer.__class__.from_config(initializer.get_config())
