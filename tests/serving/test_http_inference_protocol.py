"""The Open Inference Protocol v2 routes of `transformer-zoo serve` against a real uvicorn
server, with `tritonclient.http` as it is (binary tensors, versions, its standard request
parameters, compressed bodies), held against `ServedModel` (the same export, no server)."""

from __future__ import annotations

import gzip
import json
import shutil
import zlib

import numpy as np
import pytest
import tritonclient.http as triton

from tests.serving.conftest import prompt_of, text_input
from tests.serving.live_server import LiveServer
from tests.serving.references import completions
from transformer_zoo.generation import Sampling
from transformer_zoo.serving.http import ServerSettings, model_names
from transformer_zoo.serving.http.inference_protocol import binary_outputs, parse_request

PROMPTS = ["the cat", "a quick brown fox", "dogs", "on the fifth of March"]
SOURCES = ["March 5, 2021", "the cat sat on the mat", "dogs and cats"]
# What tritonclient's `infer(sequence_id=, sequence_start=, sequence_end=, priority=,
# timeout=)` puts in the request's parameters.
STANDARD = dict(sequence_id=7, sequence_start=True, sequence_end=True, priority=1, timeout=10**6)


@pytest.fixture(scope="module")
def exports(exports, tmp_path_factory):
    """conftest's exports and the classifier's export twice more, its configuration saying
    what a run on `label<TAB>text<TAB>text2` ("pairs") or on `label<TAB>text` ("singles")
    records (`extra.text_pairs`); the classifier's own says nothing, as an import's."""
    added = {}
    for name, reads_pairs in (("pairs", True), ("singles", False)):
        directory = tmp_path_factory.mktemp(name) / "export"
        shutil.copytree(exports["classifier"], directory)
        config = json.loads((directory / "config.json").read_text())
        config["extra"] = {**(config.get("extra") or {}), "text_pairs": reads_pairs}
        (directory / "config.json").write_text(json.dumps(config))
        added[name] = str(directory)
    return {**exports, **added}


def _body(texts, parameters=None, outputs=None, **inputs) -> dict:
    """A JSON infer body of the BYTES input `text` (and any other BYTES `inputs`)."""
    tensors = [
        {"name": name, "datatype": "BYTES", "shape": [len(data)], "data": data}
        for name, data in {"text": texts, **inputs}.items()
    ]
    body = {"inputs": tensors}
    if parameters is not None:
        body["parameters"] = parameters
    if outputs is not None:
        body["outputs"] = outputs
    return body


def _texts(result, name="text") -> list[str]:
    return [t.decode() if isinstance(t, bytes) else t for t in result.as_numpy(name)]


def test_triton_readiness_and_metadata(triton_client, server):
    assert triton_client.is_server_live() and triton_client.is_server_ready()
    assert triton_client.is_model_ready("gpt")
    assert "binary_tensor_data" in triton_client.get_server_metadata()["extensions"]
    metadata = triton_client.get_model_metadata("singles")
    assert metadata["inputs"] == [{"name": "text", "datatype": "BYTES", "shape": [-1]}]
    assert {o["name"] for o in metadata["outputs"]} == {"label", "probabilities", "embedding"}
    # A classifier whose config does not say (an import: a cross-encoder reads pairs)
    # takes `text_pair` too, as `ServedModel.classify` does.
    unsaid = triton_client.get_model_metadata("classifier")
    assert [i["name"] for i in unsaid["inputs"]] == ["text", "text_pair"]
    assert not triton_client.is_model_ready("nope")


def test_the_advertised_version_has_its_routes_and_no_other_does(triton_client, server):
    versions = triton_client.get_model_metadata("gpt")["versions"]
    assert versions == ["1"]
    for name in ("gpt", "translator", "classifier"):
        assert triton_client.is_model_ready(name, "1")
        assert triton_client.get_model_metadata(name, "1") == triton_client.get_model_metadata(name)
        assert not triton_client.is_model_ready(name, "2")
    plain = triton_client.infer("gpt", [text_input(PROMPTS)], parameters={"max_tokens": 6})
    versioned = triton_client.infer(
        "gpt", [text_input(PROMPTS)], model_version="1", parameters={"max_tokens": 6}
    )
    assert _texts(versioned) == _texts(plain)
    assert versioned.get_response()["model_version"] == "1"
    with pytest.raises(triton.InferenceServerException, match="no version '2'"):
        triton_client.infer("gpt", [text_input(["a"])], model_version="2")
    with pytest.raises(triton.InferenceServerException, match="no version '2'"):
        triton_client.get_model_metadata("gpt", "2")
    status, _, answer = server.request("GET", "/v2/models/gpt/versions/2/ready")
    assert status == 404 and "no version '2'" in answer["error"]


@pytest.mark.parametrize("binary", [True, False])
def test_triton_infer_for_every_family(triton_client, local, binary):
    outputs = None if binary else [triton.InferRequestedOutput("text", binary_data=False)]
    result = triton_client.infer(
        "gpt", [text_input(PROMPTS, binary)], outputs=outputs, parameters={"max_tokens": 12}
    )
    assert _texts(result) == completions(local["gpt"], PROMPTS, 12)
    result = triton_client.infer("translator", [text_input(SOURCES, binary)])
    assert _texts(result) == local["translator"].translate(SOURCES)
    result = triton_client.infer("classifier", [text_input(SOURCES, binary)])
    expected = local["classifier"].classify(SOURCES)
    probabilities = result.as_numpy("probabilities")
    np.testing.assert_allclose(
        probabilities, [[r["probabilities"][k] for k in ("negative", "positive")] for r in expected],
        atol=1e-6,
    )  # fmt: skip
    assert [t.decode() for t in result.as_numpy("label")] == [r["label"] for r in expected]
    result = triton_client.infer("embedder", [text_input(["the cat", "dogs"], binary)])
    np.testing.assert_allclose(
        result.as_numpy("embedding"), local["embedder"].embed(["the cat", "dogs"]), atol=1e-6
    )


def test_standard_parameters_are_ignored_and_unknown_ones_refused_by_every_model(
    triton_client, local
):
    for name, texts in (("gpt", PROMPTS), ("translator", SOURCES), ("classifier", SOURCES)):
        plain = triton_client.infer(name, [text_input(texts)])
        with_standard = triton_client.infer(name, [text_input(texts)], **STANDARD)
        for output in plain.get_response()["outputs"]:
            np.testing.assert_array_equal(
                with_standard.as_numpy(output["name"]), plain.as_numpy(output["name"])
            )
        with pytest.raises(triton.InferenceServerException, match="Unknown parameter 'beams'"):
            triton_client.infer(name, [text_input(texts)], parameters={"beams": 2})
    # Generation's parameters are unknown to an encoder-only model.
    with pytest.raises(triton.InferenceServerException, match="Unknown parameter 'max_tokens'"):
        triton_client.infer("embedder", [text_input(["a"])], parameters={"max_tokens": 2})


def test_seeds_are_integers_of_any_sign(triton_client, local):
    result = triton_client.infer(
        "gpt",
        [text_input(["the cat"])],
        parameters={"max_tokens": 8, "temperature": 1.0, "seed": -1},
    )
    expected = completions(local["gpt"], "the cat", 8, Sampling(seed=2**64 - 1))
    assert _texts(result) == expected
    for seed in (1.5, "7", True):
        with pytest.raises(triton.InferenceServerException, match="seed must be an integer"):
            triton_client.infer("gpt", [text_input(["a"])], parameters={"seed": seed})


def test_an_empty_text_is_a_prompt_but_neither_a_source_nor_a_sentence(triton_client, local):
    result = triton_client.infer("gpt", [text_input(["", "dogs"])], parameters={"max_tokens": 6})
    assert _texts(result) == completions(local["gpt"], ["", "dogs"], 6)
    for name in ("translator", "embedder"):
        with pytest.raises(triton.InferenceServerException, match="empty"):
            triton_client.infer(name, [text_input(["dogs", ""])])


@pytest.mark.parametrize("algorithm", ["gzip", "deflate"])
def test_compressed_request_bodies_are_decoded(triton_client, algorithm):
    for name, texts in (("gpt", PROMPTS), ("embedder", ["the cat", "dogs"])):
        plain = triton_client.infer(name, [text_input(texts)])
        packed = triton_client.infer(
            name, [text_input(texts)], request_compression_algorithm=algorithm
        )
        output = plain.get_response()["outputs"][0]["name"]
        np.testing.assert_array_equal(packed.as_numpy(output), plain.as_numpy(output))


def test_compressed_bodies_keep_the_size_limit_and_unknown_encodings_are_refused(exports):
    live = LiveServer({"gpt": exports["gpt"]}, ServerSettings(max_body_bytes=2000)).start()
    infer = json.dumps(
        {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["the cat"]}]}
    ).encode()
    completion = json.dumps({"model": "gpt", "prompt": "the cat", "max_tokens": 2}).encode()
    try:
        for path, body in (("/v2/models/gpt/infer", infer), ("/v1/completions", completion)):
            status, _, _ = live.request(
                "POST", path, gzip.compress(body), {"Content-Encoding": "gzip"}
            )
            assert status == 200
        padded = json.dumps({"inputs": [], "padding": "x" * 5000}).encode()  # 200 bytes packed
        for encoding, packed in (
            ("gzip", gzip.compress(padded)),
            ("deflate", zlib.compress(padded)),
        ):
            assert len(packed) < 2000
            status, _, answer = live.request(
                "POST", "/v2/models/gpt/infer", packed, {"Content-Encoding": encoding}
            )
            assert status == 413 and "decodes to over 2000 bytes" in answer["error"]
        status, _, answer = live.request(
            "POST", "/v2/models/gpt/infer", infer, {"Content-Encoding": "gzip"}
        )
        assert status == 400 and "not valid gzip" in answer["error"]
        status, _, answer = live.request(
            "POST", "/v2/models/gpt/infer", gzip.compress(infer)[:-10], {"Content-Encoding": "gzip"}
        )
        assert status == 400 and "cut short" in answer["error"]
        status, _, answer = live.request(
            "POST", "/v2/models/gpt/infer", infer, {"Content-Encoding": "br"}
        )
        assert status == 415 and "'br' is not supported" in answer["error"]
    finally:
        live.stop()


def test_triton_bad_requests_raise_the_servers_error(triton_client, server):
    wrong_type = triton.InferInput("text", [2], "INT64")
    wrong_type.set_data_from_numpy(np.array([1, 2], np.int64))
    for call, message in (
        (lambda: triton_client.infer("nope", [text_input(["a"])]), "No model 'nope'"),
        (lambda: triton_client.infer("gpt", [wrong_type]), "BYTES"),
        (lambda: triton_client.infer("translator", [text_input([""])]), "empty"),
        (
            lambda: triton_client.infer("gpt", [text_input(["a"])], parameters={"max_tokens": 0}),
            "max_tokens",
        ),
        (
            lambda: triton_client.infer("gpt", [text_input(["a"])], parameters={"top_k": 2.5}),
            "top_k must be an integer",
        ),
    ):
        with pytest.raises(triton.InferenceServerException, match=message):
            call()
    status, _, answer = server.request(
        "POST", "/v2/models/gpt/infer", b'{"inputs": [{"name": "text"}]}'
    )
    assert status == 400 and "datatype" in answer["error"]
    status, _, answer = server.request(
        "POST", "/v2/models/gpt/infer", b"{}", {"Inference-Header-Content-Length": "99"}
    )
    assert status == 400 and "body has 2 bytes" in answer["error"]
    assert triton_client.is_server_ready()


def _nested_1000(name: str, datatype: str, leaf: bytes) -> bytes:
    """An infer body of one value nested in 1,000 lists (orjson reads up to 1,024)."""
    head = f'{{"inputs": [{{"name": "{name}", "datatype": "{datatype}", "shape": [1], "data": '
    return head.encode() + b"[" * 1000 + leaf + b"]" * 1000 + b"}]}"


TEXT = {"name": "text", "datatype": "BYTES", "shape": [1], "data": ["a"]}
MALFORMED = [
    ({"inputs": [TEXT], "parameters": [1]}, "`parameters` must be an object"),
    ({"inputs": [{**TEXT, "parameters": 5}]}, "`parameters` must be an object"),
    ({"inputs": [{**TEXT, "name": ["text"]}]}, "must be strings"),
    ({"inputs": [{**TEXT, "datatype": ["BYTES"]}]}, "must be strings"),
    ({"inputs": [TEXT, {**TEXT, "data": ["b"]}]}, "'text' is given twice"),
    ({"inputs": [{**TEXT, "shape": [True]}]}, "`shape` must be a list of sizes"),
    ({"inputs": [{**TEXT, "shape": [1, 2], "data": ["a", "b"]}]}, "shape [1, 2]"),
    ({"inputs": [{**TEXT, "shape": []}]}, "shape []"),
    ({"inputs": [TEXT], "outputs": [{"name": "text"}, {"name": "text"}]}, "twice"),
    ({"inputs": [TEXT], "parameters": {"temperature": -1.0}}, "temperature"),
    # checked under greedy decoding too, as /v1 checks them (they were ignored), and the
    # seed's range as /v1's (2**63 was taken, as -2**63)
    ({"inputs": [TEXT], "parameters": {"top_p": 2}}, "`top_p` must be"),
    ({"inputs": [TEXT], "parameters": {"top_k": -5}}, "`top_k` must be"),
    ({"inputs": [TEXT], "parameters": {"temperature": 1, "seed": 2**63}}, "int64"),
    # numpy's errors, and recursion past Python's limit, were 500s echoing the message
    (_nested_1000("text", "BYTES", b'"x"'), "nested deeper than its shape [1]"),
    (_nested_1000("x", "INT32", b"1"), "nested deeper than its shape [1]"),
    ({"inputs": [{**TEXT, "shape": [2], "data": [["a"], ["b"]]}]}, "nested deeper"),
    ({"inputs": [{"name": "x", "datatype": "INT8", "shape": [1], "data": [100000]}]}, "not INT8"),
    ({"inputs": [{"name": "x", "datatype": "INT64", "shape": [1], "data": [2**70]}]}, "not INT64"),
    ({"inputs": [{"name": "x", "datatype": "INT32", "shape": [1], "data": [1.5]}]}, "not INT32"),
    ({"inputs": [{"name": "x", "datatype": "BOOL", "shape": [1], "data": ["yes"]}]}, "not BOOL"),
    ({"inputs": [{**TEXT, "shape": [1] * 65}]}, "at most 64"),
    ({"inputs": [{**TEXT, "shape": [2**63]}]}, "each an int64"),
]


@pytest.mark.parametrize(("body", "message"), MALFORMED)
def test_malformed_infer_requests_are_400_never_500(server, triton_client, body, message):
    """Each was a 500 (a list's `.get`, an unhashable name), silently the last of two
    inputs, a 2-D or 0-D batch read as [N], or a negative temperature read as greedy."""
    status, _, answer = server.request("POST", "/v2/models/gpt/infer", body)
    assert status == 400 and message in answer["error"], answer
    assert triton_client.is_server_ready()


@pytest.mark.parametrize(
    ("datatype", "shape", "message"),
    [
        ("INT64", [2**32, 2**32], "0 bytes for INT64 of shape [4294967296, 4294967296]"),
        ("BYTES", [2**32, 2**32], "0 elements for shape [4294967296, 4294967296]"),
        ("INT64", [0, 2**62], "numpy has no INT64 of shape [0, 4611686018427387904]"),
    ],
)
def test_a_binary_tensor_of_a_shape_numpy_cannot_count_is_400(server, datatype, shape, message):
    """numpy's product of the shape wrapped to 0 elements, which the empty data matched,
    and reshaping it was a 500."""
    header = json.dumps(
        {"inputs": [{"name": "x", "datatype": datatype, "shape": shape,
                     "parameters": {"binary_data_size": 0}}]}
    ).encode()  # fmt: skip
    status, _, answer = server.request(
        "POST",
        "/v2/models/gpt/infer",
        header,
        {"Inference-Header-Content-Length": str(len(header))},
    )
    assert status == 400 and message in answer["error"], answer


def test_triton_client_refusals_of_shape_and_temperature(triton_client):
    batch = triton.InferInput("text", [1, 2], "BYTES")
    batch.set_data_from_numpy(np.array([["a", "b"]], dtype=object))
    with pytest.raises(triton.InferenceServerException, match=r"shape \[1, 2\]"):
        triton_client.infer("gpt", [batch])
    with pytest.raises(triton.InferenceServerException, match="temperature"):
        triton_client.infer("gpt", [text_input(["a"])], parameters={"temperature": -0.5})
    asked = [
        triton.InferRequestedOutput("text", binary_data=True),
        triton.InferRequestedOutput("finish_reason", binary_data=False),
    ]
    result = triton_client.infer(
        "gpt", [text_input(["a"])], outputs=asked, parameters={"max_tokens": 2}
    )
    outputs = {o["name"]: o for o in result.get_response()["outputs"]}
    assert (
        "binary_data_size" in outputs["text"]["parameters"] and "data" in outputs["finish_reason"]
    )
    assert len(_texts(result)) == 1 and _texts(result, "finish_reason") == ["length"]


def test_a_lone_surrogate_is_malformed_json_not_a_500(server):
    body = b'{"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["\\ud800"]}]}'
    status, _, answer = server.request("POST", "/v2/models/gpt/infer", body)
    assert status == 400 and "not valid JSON" in answer["error"], answer


def test_a_name_with_a_slash_has_every_v2_route(exports):
    """vLLM-style `org/model` names are reachable on /v2 too, their /ready, /infer and
    /versions/1/... included (a `{name}` route takes no slash: they were 404)."""
    live = LiveServer({"org/gpt": exports["gpt"]}).start()
    try:
        client = triton.InferenceServerClient(live.url.removeprefix("http://"))
        assert client.is_model_ready("org/gpt") and client.is_model_ready("org/gpt", "1")
        assert not client.is_model_ready("org/gpt", "2") and not client.is_model_ready("org")
        assert client.get_model_metadata("org/gpt")["name"] == "org/gpt"
        assert client.get_model_metadata("org/gpt", "1") == client.get_model_metadata("org/gpt")
        texts = [
            _texts(
                client.infer(
                    "org/gpt",
                    [text_input(PROMPTS)],
                    model_version=version,
                    parameters={"max_tokens": 4},
                )
            )  # fmt: skip
            for version in ("", "1")
        ]
        assert texts[0] == texts[1] and len(texts[0]) == len(PROMPTS)
        status, _, answer = live.request(
            "POST", "/v1/completions", {"model": "org/gpt", "prompt": "a", "max_tokens": 2}
        )
        assert status == 200 and answer["model"] == "org/gpt"
    finally:
        live.stop()


@pytest.mark.parametrize(
    "name", ["org/ready", "org/infer", "a/versions/1", "a//b", "a/", "../a", ""]
)
def test_names_that_would_read_as_other_v2_routes_are_refused(name):
    with pytest.raises(ValueError, match=f"model name {name!r}"):
        model_names(["exports/gpt"], [name])


def test_a_directory_given_as_dot_is_named_after_itself(tmp_path, monkeypatch):
    """`serve .` named its model "." (and `serve ..` ".."), whose /v2 routes curl
    normalises away."""
    (tmp_path / "gpt" / "deep").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "gpt" / "deep")
    assert model_names([".", ".."]) == {"deep": ".", "gpt": ".."}
    assert model_names(["./"]) == {"deep": "./"}
    for name in (".", ".."):
        with pytest.raises(ValueError, match=f"model name {name!r}"):
            model_names(["exports/gpt"], [name])


FIRSTS, SECONDS = ["the cat sat", "the cat sat", "dogs"], ["blue sky", "the cat sat", "on the mat"]


def _pair_inputs(firsts, seconds):
    second = triton.InferInput("text_pair", [len(seconds)], "BYTES")
    second.set_data_from_numpy(np.array(seconds, dtype=object))
    return [text_input(firsts), second]


def test_a_pair_classifier_takes_the_second_texts_as_text_pair(triton_client, server, local):
    """It read only `text` (a tab-joined pair as one text, a lone text silently scored as
    one) and refused `text_pair`."""
    metadata = triton_client.get_model_metadata("pairs")
    assert [i["name"] for i in metadata["inputs"]] == ["text", "text_pair"]
    assert {i["datatype"] for i in metadata["inputs"]} == {"BYTES"}
    assert [o["name"] for o in metadata["outputs"]] == ["label", "probabilities"]
    result = triton_client.infer("pairs", _pair_inputs(FIRSTS, SECONDS))
    expected = local["pairs"].classify(FIRSTS, SECONDS)
    labels = local["pairs"].config.label_names
    np.testing.assert_allclose(
        result.as_numpy("probabilities"),
        [[r["probabilities"][k] for k in labels] for r in expected],
        atol=1e-6,
    )
    assert [t.decode() for t in result.as_numpy("label")] == [r["label"] for r in expected]
    # The same weights ("pairs" is the classifier's export, saying it reads pairs) on the
    # tab-joined texts, as the server read them before.
    joined = [f"{a}\t{b}" for a, b in zip(FIRSTS, SECONDS, strict=True)]
    single = local["classifier"].classify(joined)
    assert not np.allclose(
        [r["score"] for r in single], [r["score"] for r in expected], atol=1e-3
    )  # so that the comparison above tells pairs from tab-joined texts
    for body, message in (
        (_body(FIRSTS), "reads text pairs"),
        (_body(FIRSTS, text_pair=SECONDS[:2]), "2 texts for the 3 of `text`"),
        (_body(FIRSTS, text_pair=["a", "\u200b", "b"]), "text_pair[1] is empty or blank"),
    ):
        status, _, answer = server.request("POST", "/v2/models/pairs/infer", body)
        assert status == 400 and message in answer["error"] and "text_pair" in answer["error"]
    status, _, answer = server.request(
        "POST", "/v2/models/singles/infer", _body(FIRSTS, text_pair=SECONDS)
    )
    assert status == 400 and "one BYTES input, `text`" in answer["error"]
    # A classifier whose config does not say takes pairs and lone texts, as `classify`;
    # with `text_pair` it gives no `embedding` (`embed` reads single texts).
    for inputs, expected in (
        ({"text_pair": SECONDS}, local["classifier"].classify(FIRSTS, SECONDS)),
        ({}, local["classifier"].classify(FIRSTS)),
    ):
        status, _, answer = server.request(
            "POST", "/v2/models/classifier/infer", _body(FIRSTS, **inputs)
        )
        assert status == 200, answer
        got = {o["name"]: o["data"] for o in answer["outputs"]}
        assert got["label"] == [r["label"] for r in expected]
        assert ("embedding" in got) == (not inputs)
    # /v1/embeddings embeds single texts, as `ServedModel.embed` does, pair model or not
    status, _, answer = server.request(
        "POST", "/v1/embeddings", {"model": "pairs", "input": FIRSTS}
    )
    assert status == 200
    np.testing.assert_allclose(
        [d["embedding"] for d in answer["data"]], local["pairs"].embed(FIRSTS), atol=1e-5
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (_body(["the cat"], outputs=[{"name": "probabilities", "parameters": {"classification": 1}}]),
         "`classification`"),
        (_body(["the cat"], outputs=[{"name": "label", "parameters": {"foo": 1}}]),
         "unknown parameter 'foo'"),
        (_body(["the cat"], outputs=[{"name": "label", "parameters": {"binary_data": "no"}}]),
         "`binary_data` must be true or false"),
        (_body(["the cat"], {"binary_data_output": 1}), "`binary_data_output` must be true"),
        ({**_body(["the cat"]), "id": {"a": [1]}}, "`id` must be a string"),
    ],
)  # fmt: skip
def test_output_parameters_and_the_id_are_checked(server, body, message):
    """Each was answered 200: the FP32 tensor for Triton's classification, an unknown
    output parameter ignored, `"no"` read as binary, an object echoed as the id."""
    status, _, answer = server.request("POST", "/v2/models/classifier/infer", body)
    assert status == 400 and message in answer["error"], answer


def test_tritonclients_class_count_is_refused_by_name(triton_client):
    asked = [triton.InferRequestedOutput("probabilities", class_count=1)]
    with pytest.raises(triton.InferenceServerException, match="classification extension"):
        triton_client.infer("classifier", [text_input(["the cat"])], outputs=asked)
    answer = triton_client.infer(
        "classifier", [text_input(["the cat"])], request_id="seven"
    ).get_response()
    assert answer["id"] == "seven"


@pytest.mark.parametrize("blank", ["", " \t", "\u200b", "\ufeff\x01"])
def test_a_blank_sentence_is_refused_by_its_index(server, blank):
    """ "" was refused without its index, and a zero-width space (no tokens) was read."""
    for model in ("classifier", "embedder"):
        status, _, answer = server.request(
            "POST", f"/v2/models/{model}/infer", _body(["the", blank])
        )
        assert status == 400 and "text[1] is empty or blank" in answer["error"], answer


def test_a_translations_default_is_cut_to_the_limit_and_a_value_sent_is_not(
    server, local, monkeypatch
):
    """The default budget was refused under `--max-tokens` for a value the client never
    sent, and a value sent past the room was cut to it without a word."""
    translator, gpt = local["translator"], local["gpt"]
    room = translator.room(1)
    assert translator.default_new_tokens() > 4
    monkeypatch.setattr(server.app.state.settings, "max_tokens", 4)
    for model, served in (("translator", translator), ("gpt", gpt)):
        status, _, answer = server.request("POST", f"/v2/models/{model}/infer", _body(["dogs"]))
        assert status == 200, answer
        assert _json_texts(answer) == completions(served, ["dogs"], 4)
        status, _, answer = server.request(
            "POST", f"/v2/models/{model}/infer", _body(["dogs"], {"max_tokens": 5})
        )
        assert status == 400 and "max_tokens=5 is more than this server's 4" in answer["error"]
    monkeypatch.setattr(server.app.state.settings, "max_tokens", None)
    status, _, answer = server.request(
        "POST", "/v2/models/translator/infer", _body(["dogs"], {"max_tokens": room + 1})
    )
    assert status == 400 and f"max_tokens={room + 1}" in answer["error"], answer
    assert f"room for {room} new tokens" in answer["error"]
    status, _, answer = server.request(
        "POST", "/v2/models/translator/infer", _body(["dogs"], {"max_tokens": room})
    )
    assert status == 200


def test_a_decoder_only_default_is_cut_to_the_room_the_prompt_leaves(server, local):
    """The default 16 was refused, naming it, where the prompt left less room."""
    gpt = local["gpt"]
    text = prompt_of(gpt, gpt.dims.max_length - 3)
    status, _, answer = server.request("POST", "/v2/models/gpt/infer", _body([text, "dogs"]))
    assert status == 200, answer
    assert _json_texts(answer) == [
        completions(gpt, [text], 3)[0],
        completions(gpt, ["dogs"], 16)[0],
    ]


def _json_texts(answer) -> list[str]:
    return next(o["data"] for o in answer["outputs"] if o["name"] == "text")


@pytest.mark.parametrize("dtype, datatype", [("<i8", "INT64"), ("<f4", "FP32"), ("<i4", "INT32")])
def test_a_binary_numeric_input_reads_as_tritonclient_wrote_it(dtype, datatype):
    """Binary numeric tensors are little-endian, as tritonclient's `set_data_from_numpy`
    writes them (numpy's `tobytes()` of the array): the parsed array is the one sent."""
    sent = np.array([[5, 9, 300], [-2, 0, 2**20]], dtype)
    tensor = triton.InferInput("x", list(sent.shape), datatype)
    tensor.set_data_from_numpy(sent, binary_data=True)
    body, header_length = triton.InferenceServerClient.generate_request_body([tensor])
    _, tensors = parse_request(body, str(header_length))
    np.testing.assert_array_equal(tensors["x"], sent)
    assert tensors["x"].dtype == sent.dtype


def test_binary_data_output_covers_named_outputs_that_do_not_say():
    """The binary extension: the request's `binary_data_output` is the default of every
    output, named ones included; an output's own `binary_data` overrides it."""
    names = ["label", "probabilities"]
    request = {"parameters": {"binary_data_output": True}, "outputs": [{"name": "label"}]}
    assert binary_outputs(request, names) == (["label"], {"label"})
    request["outputs"] = [{"name": "label"}, {"name": "probabilities",
                                              "parameters": {"binary_data": False}}]  # fmt: skip
    assert binary_outputs(request, names) == (names, {"label"})
    assert binary_outputs({"outputs": [{"name": "label"}]}, names) == (["label"], set())
