"""The live server of the HTTP tests (`LiveServer`: real uvicorn on a loopback port), the
exports it serves and the same exports without HTTP, which its answers must agree with."""

from __future__ import annotations

import numpy as np
import openai
import pytest
import tritonclient.http as triton

from tests.serving.live_server import LiveServer
from transformer_zoo.run_directory import FAMILIES
from transformer_zoo.serving import load_onnx
from transformer_zoo.serving.http import ServerSettings


@pytest.fixture(scope="module")
def exports(family_artifacts, wordpiece_artifacts):
    """The ONNX exports the server reads (not the SavedModel: see `family_artifacts`)."""
    onnx = {family: family_artifacts(family, saved_model=False) for family in FAMILIES}
    return {
        "gpt": str(onnx["decoder-only"].export_dir),
        "translator": str(onnx["encoder-decoder"].export_dir),
        "classifier": str(onnx["encoder-only"].export_dir),
        "embedder": str(wordpiece_artifacts.export_dir),
    }


@pytest.fixture(scope="module")
def server(exports):
    live = LiveServer(exports, ServerSettings(max_batch_size=8)).start()
    yield live
    live.stop()


@pytest.fixture(scope="module")
def local(exports):
    """The same exports served without HTTP: what the server must agree with."""
    return {name: load_onnx(directory) for name, directory in exports.items()}


@pytest.fixture
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)


@pytest.fixture
def triton_client(server):
    return triton.InferenceServerClient(server.url.removeprefix("http://"))


@pytest.fixture(scope="session")
def hf_exports(hf_imports):
    """The GPT-2 (byte-level BPE) and Marian checkpoints of tests/data, imported and
    exported to ONNX (`hf_imports`): models whose tokenizers are not this project's
    SentencePiece."""
    return {name: str(hf_imports(name)[1]) for name in ("gpt2", "marian")}


def text_input(texts, binary=True):
    """A tritonclient BYTES input `text` holding `texts`."""
    tensor = triton.InferInput("text", [len(texts)], "BYTES")
    tensor.set_data_from_numpy(np.array(texts, dtype=object), binary_data=binary)
    return tensor


def prompt_of(served, length: int) -> str:
    """A text whose prompt (the begin token, then its pieces) is `length` tokens."""
    words: list[str] = []
    while len(served.tokenizer.encode(" ".join(words))) + 1 < length:
        longer = (words + [w] for w in ("dogs", "the", "a", "cat"))
        fits = [w for w in longer if len(served.tokenizer.encode(" ".join(w))) + 1 <= length]
        assert fits, f"no prompt of {length} tokens"
        words = fits[0]
    text = " ".join(words)
    assert len(served.prompt_ids(text)[0]) == length
    return text
