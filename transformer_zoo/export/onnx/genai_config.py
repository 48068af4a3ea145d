"""`genai_config.json`: what onnxruntime-genai needs to run our decoder-only `model.onnx`.

onnxruntime-genai (0.18) accepts `model.type` "decoder" for a generic decoder-only graph
with Optimum's I/O names. Our graph grows its cache by concatenation, so
`past_present_share_buffer` is false; it returns logits for every position and takes
`attention_mask` and `position_ids` as int64, like `input_ids`. Without
`intra_op_num_threads` in the session options onnxruntime-genai runs single-threaded.
"""

from __future__ import annotations

import os

from transformer_zoo.files import write_json
from transformer_zoo.run_directory import ModelDimensions

GENAI_CONFIG_FILE = "genai_config.json"


def genai_config(dims: ModelDimensions, special_ids: dict, intra_op_num_threads: int = 2) -> dict:
    """The config of a decoder-only export with dimensions `dims`."""
    context = dims.max_length
    return {
        "model": {
            "type": "decoder",
            "vocab_size": dims.vocabulary_size,
            "context_length": context,
            "bos_token_id": int(special_ids.get("bos", 2)),
            "eos_token_id": int(special_ids.get("eos", 3)),
            "pad_token_id": int(special_ids.get("pad", 0)),
            "decoder": {
                "filename": "model.onnx",
                "session_options": {
                    "log_id": "onnxruntime-genai",
                    "provider_options": [],
                    "intra_op_num_threads": int(intra_op_num_threads),
                },
                "head_size": dims.head_dim,
                "hidden_size": dims.hidden_dim,
                "num_attention_heads": dims.num_heads,
                "num_key_value_heads": dims.num_heads,
                "num_hidden_layers": dims.num_layers,
                "inputs": {
                    "input_ids": "input_ids",
                    "attention_mask": "attention_mask",
                    "position_ids": "position_ids",
                    "past_key_names": "past_key_values.%d.key",
                    "past_value_names": "past_key_values.%d.value",
                },
                "outputs": {
                    "logits": "logits",
                    "present_key_names": "present.%d.key",
                    "present_value_names": "present.%d.value",
                },
            },
        },
        "search": {
            "do_sample": False,
            "num_beams": 1,
            "num_return_sequences": 1,
            "max_length": context,
            "min_length": 0,
            "past_present_share_buffer": False,
            "temperature": 1.0,
            # Sampling (`do_sample` true) over the whole distribution, as our `Sampling`
            # does by default; 1 would make it greedy whatever the seed.
            "top_k": dims.vocabulary_size,
            "top_p": 1.0,
            "repetition_penalty": 1.0,
            "length_penalty": 1.0,
            "early_stopping": True,
            "no_repeat_ngram_size": 0,
            "diversity_penalty": 0.0,
        },
    }


def write_genai_config(
    out_dir: str, dims: ModelDimensions, special_ids: dict, threads: int = 2
) -> str:
    path = os.path.join(out_dir, GENAI_CONFIG_FILE)
    write_json(path, genai_config(dims, special_ids, threads))
    return path
