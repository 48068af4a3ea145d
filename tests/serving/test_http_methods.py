"""HTTP itself on `transformer-zoo serve`, against a real uvicorn server: the methods each
route answers (HEAD wherever GET, RFC 9110 §9.1; 405 with the route's own `Allow`), the
request headers it reads (the `Authorization` scheme in any case, §11.1; every
Content-Encoding, §5.3; the Content-Types a browser sends without a CORS preflight
refused), and no pages beyond the API."""

from __future__ import annotations

import gzip
import http.client
import json
import zlib

import pytest
import tritonclient.http as triton
from fastapi.routing import APIRoute

from tests.serving.conftest import text_input
from tests.serving.live_server import LiveServer
from transformer_zoo.serving.http import ServerSettings
from transformer_zoo.serving.http.handling import decompress

KEY = "sesame"
AUTHORIZED = {"Authorization": f"Bearer {KEY}"}
INFER = "/v2/models/gpt/infer"
GET_PATHS = [
    "/health",
    "/metrics",
    "/v1/models",
    "/v1/models/gpt",
    "/v1/models/nope",
    "/v2",
    "/v2/health/live",
    "/v2/health/ready",
    "/v2/models/gpt",
    "/v2/models/gpt/ready",
    "/v2/models/gpt/versions/1",
    "/v2/models/gpt/versions/1/ready",
    "/v2/models/gpt/versions/2",
    "/v2/models/nope",
]


def request(live: LiveServer, method: str, path: str, body: bytes = b"", headers=()):
    """`(status, headers, raw body)`, with `headers` as pairs, a name given twice sent
    twice, and the key's: `LiveServer.request` takes a dict and parses a JSON answer, which
    a HEAD answer has none of."""
    connection = http.client.HTTPConnection("127.0.0.1", live.port, timeout=60)
    try:
        connection.putrequest(method, path)
        sent = [*AUTHORIZED.items(), *(headers.items() if isinstance(headers, dict) else headers)]
        for name, value in [*sent, *([("Content-Length", str(len(body)))] if body else [])]:
            connection.putheader(name, value)
        connection.endheaders(body or None)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def infer(live: LiveServer, body: bytes, headers=()):
    """`(status, parsed JSON)` of a POST to `INFER`."""
    status, _, answer = request(live, "POST", INFER, body, headers)
    return status, json.loads(answer)


def infer_body(texts=("the cat",)) -> bytes:
    data = {"name": "text", "datatype": "BYTES", "shape": [len(texts)], "data": list(texts)}
    return json.dumps({"inputs": [data], "parameters": {"max_tokens": 3}}).encode()


@pytest.fixture(scope="module")
def keyed(family_artifacts):
    live = LiveServer(
        {"gpt": str(family_artifacts("decoder-only", saved_model=False).export_dir)},
        ServerSettings(api_key=KEY),
    ).start()
    yield live
    live.stop()


def test_every_get_route_answers_head(keyed):
    """HEAD was 405 on every route: FastAPI's routes, unlike Starlette's, do not add it."""
    for route in keyed.app.routes:
        if isinstance(route, APIRoute) and "GET" in route.methods:
            assert "HEAD" in route.methods, route.path


@pytest.mark.parametrize("path", GET_PATHS)
def test_head_answers_as_get_does_without_the_body(keyed, path):
    got, got_headers, body = request(keyed, "GET", path)
    status, headers, empty = request(keyed, "HEAD", path)
    assert status == got and empty == b"" and body
    assert headers["content-type"] == got_headers["content-type"]


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        (method, path, "POST")
        for method in ("GET", "HEAD", "PUT", "OPTIONS", "DELETE")
        for path in (INFER, "/v2/models/gpt/versions/1/infer")
    ]
    + [
        ("POST", "/v2/models/gpt", "GET, HEAD"),
        ("POST", "/v2/models/gpt/ready", "GET, HEAD"),
        ("PUT", "/v2/models/gpt/versions/1", "GET, HEAD"),
        ("POST", "/health", "GET, HEAD"),
        ("GET", "/v1/completions", "POST"),
    ],
)
def test_a_wrong_method_is_405_with_the_routes_own_allow(keyed, method, path, allow):
    """`PUT .../versions/1/infer` answered `Allow: GET` (the metadata route of a model
    `gpt/versions/1/infer`) and `GET .../infer` 404 "No model 'gpt/infer'"."""
    status, headers, answer = request(keyed, method, path)
    assert status == 405 and headers["allow"] == allow
    assert answer == b"" if method == "HEAD" else b'"error"' in answer


@pytest.mark.parametrize(
    ("authorization", "status"),
    [
        (f"Bearer {KEY}", 200),
        (f"bearer {KEY}", 200),
        (f"BEARER {KEY}", 200),
        (f"Bearer   {KEY}", 200),
        (f"Bearer {KEY}x", 401),
        (f"Bearer{KEY}", 401),
        (KEY, 401),
        (f"Basic {KEY}", 401),
        ("Bearer", 401),
        ("", 401),
    ],
)
def test_the_bearer_scheme_is_read_in_any_case(keyed, authorization, status):
    """RFC 9110 §11.1: the scheme is case-insensitive; `bearer KEY` was 401."""
    for method in ("GET", "HEAD"):
        for path in ("/v1/models", "/v2/models/gpt"):
            connection = http.client.HTTPConnection("127.0.0.1", keyed.port, timeout=60)
            headers = {"Authorization": authorization} if authorization else {}
            try:
                connection.request(method, path, headers=headers)
                assert connection.getresponse().status == status, (method, path)
            finally:
                connection.close()


@pytest.mark.parametrize("path", ["/docs", "/redoc", "/openapi.json", "/docs/oauth2-redirect"])
def test_no_pages_beyond_the_api_are_served(keyed, path):
    """FastAPI's default documentation pages answered without the key."""
    assert request(keyed, "GET", path)[0] == 404


def test_gzip_members_are_read_whole_and_bytes_after_the_data_refused(keyed):
    """A gzip body is a series of members (RFC 1952 §2.2): the second was dropped, and so
    were bytes after the data; two Content-Encoding headers read as the first only."""
    body = infer_body(("the cat", "dogs"))
    status, plain = infer(keyed, body)
    assert status == 200
    half = len(body) // 2
    members = gzip.compress(body[:half]) + gzip.compress(b"") + gzip.compress(body[half:])
    assert gzip.decompress(members) == body
    assert infer(keyed, members, {"Content-Encoding": "gzip"}) == (200, plain)
    for packed, encoding in (
        (gzip.compress(body) + b"garbage", "gzip"),
        (gzip.compress(body) + b"\0", "gzip"),
        (zlib.compress(body[:half]) + zlib.compress(body[half:]), "deflate"),
    ):
        status, answer = infer(keyed, packed, {"Content-Encoding": encoding})
        assert status == 400 and "after the end of its data" in answer["error"], answer
    # RFC 9110 §5.3: two headers are the one list `identity, gzip`
    both = [("Content-Encoding", "identity"), ("Content-Encoding", "gzip")]
    assert infer(keyed, gzip.compress(body), both) == (200, plain)
    status, answer = infer(keyed, body, both)
    assert status == 400 and "not valid gzip" in answer["error"]
    for stacked in ("gzip, gzip", "gzip, br"):
        packed = gzip.compress(gzip.compress(body))
        status, answer = infer(keyed, packed, {"Content-Encoding": stacked})
        assert status == 415 and "is not supported" in answer["error"]


@pytest.mark.parametrize(
    "pieces", [[b"a"], [b"a", b"", b"bc"], [b"x" * 70_000, b"y" * 40_000, b""], [b""] * 3000]
)
def test_gzip_members_decode_as_pythons_gzip_reads_them(pieces):
    packed = b"".join(gzip.compress(piece, mtime=0) for piece in pieces)
    assert decompress(packed, "gzip", 10**6) == gzip.decompress(packed)


@pytest.mark.parametrize(
    "kind", ["text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
             "multipart/form-data; boundary=x"],
)  # fmt: skip
def test_a_body_a_browser_may_send_without_a_preflight_is_refused(keyed, kind):
    """Each was read as JSON on /v2 (as /v1 no longer did): any web page could start
    generations on a server without a key."""
    status, answer = infer(keyed, infer_body(), {"Content-Type": kind})
    assert status == 415 and kind.split(";")[0] in answer["error"], answer


def test_json_and_binary_bodies_are_read_with_the_types_clients_send(keyed):
    """tritonclient.http sends no Content-Type; its C++ client (and perf_analyzer) sends
    `application/octet-stream`, for JSON and binary tensors alike."""
    client = triton.InferenceServerClient(keyed.url.removeprefix("http://"))
    # a copy: the client adds its own headers to the dict it is given
    expected = client.infer(
        "gpt", [text_input(["the cat"])], parameters={"max_tokens": 3}, headers=dict(AUTHORIZED)
    ).as_numpy("text")
    binary, header_length = triton.InferenceServerClient.generate_request_body(
        [text_input(["the cat"])],
        [triton.InferRequestedOutput("text", binary_data=False)],
        parameters={"max_tokens": 3},
    )
    for body, headers in (
        (binary, {"Inference-Header-Content-Length": str(header_length)}),
        (infer_body(), {}),
    ):
        for kind in (None, "application/octet-stream", "application/json"):
            typed = {**headers, **({"Content-Type": kind} if kind else {})}
            status, answer = infer(keyed, body, typed)
            assert status == 200, answer
            text = next(o for o in answer["outputs"] if o["name"] == "text")["data"]
            assert text == [t.decode() for t in expected]
