"""Training with `model.fit`: `TrainConfig` (every setting of a run, here without
TensorFlow), `trainer.train(config)` (one run top to bottom), the recipe (`recipe/`), the
callbacks (`callbacks/`), masked-LM pretraining and `tf.distribute` strategies."""

from transformer_zoo.train.config import TrainConfig

__all__ = ["TrainConfig"]
