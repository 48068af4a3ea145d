import numpy as np
import pytest

from transformer_zoo.models import EncoderDecoder, from_preset
from transformer_zoo.models.attention_weights import attention_weights


@pytest.fixture(scope="module")
def model():
    return EncoderDecoder(30, num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32)


def test_weights_are_per_block_probabilities_with_masks_respected(model):
    source = np.array([[5, 6, 7, 0, 0], [8, 9, 10, 11, 12]])
    target = np.array([[1, 4, 5, 6], [1, 7, 8, 9]])
    weights = attention_weights(model, source, target)
    assert len(weights["self"]) == len(weights["cross"]) == 2
    cross, self_ = weights["cross"][-1], weights["self"][0]
    assert cross.shape == (2, 2, 4, 5) and self_.shape == (2, 2, 4, 4)
    np.testing.assert_allclose(cross.sum(-1), 1.0, atol=1e-5)
    assert np.all(cross[0, :, :, 3:] == 0.0)  # source padding gets no attention
    assert np.all(np.triu(self_[1, 0], k=1) == 0.0)  # no looking ahead


def test_only_encoder_decoder_models_are_accepted():
    with pytest.raises(ValueError, match="EncoderDecoder"):
        attention_weights(
            from_preset("tiny", family="decoder-only", vocabulary_size=20), [[1]], [[1]]
        )
