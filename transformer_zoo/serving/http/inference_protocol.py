"""The Open Inference Protocol v2 (KServe, Triton) request and response bodies, with the
binary tensor extension that `tritonclient.http` uses by default.

A body with the `Inference-Header-Content-Length: N` header is N bytes of JSON, then the
binary data of the tensors whose `parameters.binary_data_size` says how many bytes each
takes, in order. A BYTES tensor's data is each element as a 4-byte little-endian length
followed by its bytes; numeric tensors are their row-major little-endian values.
"""

from __future__ import annotations

import json
import math
import struct

import numpy as np

from transformer_zoo.errors import is_integer
from transformer_zoo.serving.http.handling import loads

HEADER = "Inference-Header-Content-Length"
DTYPES = {
    "BOOL": np.bool_,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "UINT8": np.uint8,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
}


# A shape has at most numpy's 64 dimensions, each an int64 (the protocol's type for one),
# so that counting its elements is cheap and exact: numpy's product of [2**32, 2**32]
# wrapped to 0, and the binary tensor of 0 bytes then failed to reshape (a 500).
MAX_DIMENSIONS = 64
MAX_DIMENSION = 2**63 - 1


class ProtocolError(ValueError):
    """A malformed request: answered 400 with `{"error": message}`."""


def parse_request(body: bytes, header_length: str | None) -> tuple[dict, dict[str, object]]:
    """`(request JSON, {input name: numpy array or list of str})` of an infer body."""
    try:
        split = len(body) if header_length is None else int(header_length)
    except ValueError:
        raise ProtocolError(f"{HEADER} must be an integer. Received: {header_length!r}") from None
    if not 0 <= split <= len(body):
        raise ProtocolError(f"{HEADER} is {split}, but the body has {len(body)} bytes.")
    try:
        request = loads(body[:split])
    except ValueError as error:
        raise ProtocolError(f"The request is not valid JSON: {error}") from None
    if not isinstance(request, dict) or not isinstance(request.get("inputs"), list):
        raise ProtocolError("The request needs an `inputs` list.")
    _check_parameters(request, "The request's")
    if not isinstance(request.get("id", ""), str):  # the protocol's `id` is a string
        raise ProtocolError(f"The request's `id` must be a string. Received: {request['id']!r}")
    binary, offset, tensors = body[split:], 0, {}
    for item in request["inputs"]:
        if not isinstance(item, dict) or not {"name", "datatype", "shape"} <= set(item):
            raise ProtocolError("Each input needs `name`, `datatype` and `shape`.")
        name, datatype, shape = item["name"], item["datatype"], item["shape"]
        if not isinstance(name, str) or not isinstance(datatype, str):
            raise ProtocolError("An input's `name` and `datatype` must be strings.")
        if name in tensors:
            raise ProtocolError(f"Input {name!r} is given twice.")
        if (
            not isinstance(shape, list)
            or len(shape) > MAX_DIMENSIONS
            or not all(_is_size(d) for d in shape)
        ):
            raise ProtocolError(
                f"Input {name!r}: `shape` must be a list of sizes "
                f"(at most {MAX_DIMENSIONS}, each an int64)."
            )
        _check_parameters(item, f"Input {name!r}:")
        size = (item.get("parameters") or {}).get("binary_data_size")
        if size is not None:
            if not _is_size(size) or offset + size > len(binary):
                raise ProtocolError(f"Input {name!r}: binary_data_size runs past the body.")
            tensors[name] = _from_bytes(name, datatype, shape, binary[offset : offset + size])
            offset += size
        elif "data" in item:
            tensors[name] = _from_json(name, datatype, shape, item["data"])
        else:
            raise ProtocolError(f"Input {name!r} has neither `data` nor binary data.")
    if offset != len(binary):
        raise ProtocolError(f"{len(binary) - offset} bytes of binary data belong to no input.")
    return request, tensors


def _check_parameters(item: dict, whose: str) -> None:
    """A request's or a tensor's `parameters`: an object, or absent (or null)."""
    if not isinstance(item.get("parameters") or {}, dict):
        raise ProtocolError(f"{whose} `parameters` must be an object.")


def _is_size(value) -> bool:
    return is_integer(value) and 0 <= value <= MAX_DIMENSION


def _count(shape: list[int]) -> int:
    """The elements of a tensor of `shape`, in Python's integers, which do not wrap."""
    return math.prod(shape)


def _from_json(name, datatype, shape, data):
    flat = _flatten(name, data, shape)
    if len(flat) != _count(shape):
        raise ProtocolError(f"Input {name!r}: {len(flat)} values for shape {shape}.")
    if datatype == "BYTES":
        if not all(isinstance(v, str) for v in flat):
            raise ProtocolError(f"Input {name!r}: BYTES data must be strings.")
        return flat
    if datatype not in DTYPES:
        raise ProtocolError(f"Input {name!r}: unknown datatype {datatype!r}.")
    dtype = np.dtype(DTYPES[datatype])
    wrong = ProtocolError(f"Input {name!r}: the data are not {datatype}.")
    # JSON's own types, as Triton reads them: numpy takes "7", 1.5 and true as integers.
    if dtype.kind == "b":
        fits = all(isinstance(v, bool) for v in flat)
    else:
        number = int if dtype.kind in "iu" else (int, float)
        fits = all(isinstance(v, number) and not isinstance(v, bool) for v in flat)
    if not fits:
        raise wrong
    try:
        values = np.asarray(flat, dtype)
    except OverflowError:  # out of the type's range: [100000] as INT8
        raise wrong from None
    return _reshaped(name, datatype, values, shape)


def _flatten(name, data, shape) -> list:
    """The values of `data` in row-major order: flat, or lists nested as deep as `shape`
    and no deeper. Without recursion, so that the check holds however deep the body
    goes: orjson reads lists nested 1,000 deep, past Python's recursion limit (a 500)."""
    flat, pending = [], [iter([data])]
    while pending:
        for item in pending[-1]:
            if isinstance(item, list):
                if len(pending) > max(len(shape), 1):
                    raise ProtocolError(
                        f"Input {name!r}: `data` is nested deeper than its shape {shape}."
                    )
                pending.append(iter(item))
                break
            flat.append(item)
        else:
            pending.pop()
    return flat


def _from_bytes(name, datatype, shape, raw: bytes):
    if datatype == "BYTES":
        items, offset = [], 0
        while offset < len(raw):
            if offset + 4 > len(raw):
                raise ProtocolError(f"Input {name!r}: a BYTES element is cut short.")
            (length,) = struct.unpack_from("<I", raw, offset)
            offset += 4
            if offset + length > len(raw):
                raise ProtocolError(f"Input {name!r}: a BYTES element is cut short.")
            items.append(raw[offset : offset + length])
            offset += length
        if len(items) != _count(shape):
            raise ProtocolError(f"Input {name!r}: {len(items)} elements for shape {shape}.")
        try:
            return [item.decode("utf-8") for item in items]
        except UnicodeDecodeError:
            raise ProtocolError(f"Input {name!r}: the text is not UTF-8.") from None
    if datatype not in DTYPES:
        raise ProtocolError(f"Input {name!r}: unknown datatype {datatype!r}.")
    dtype = np.dtype(DTYPES[datatype]).newbyteorder("<")
    if len(raw) != _count(shape) * dtype.itemsize:
        raise ProtocolError(f"Input {name!r}: {len(raw)} bytes for {datatype} of shape {shape}.")
    return _reshaped(name, datatype, np.frombuffer(raw, dtype), shape)


def _reshaped(name, datatype, values: np.ndarray, shape) -> np.ndarray:
    try:
        return values.reshape(shape)
    except ValueError:  # no elements, but a shape numpy cannot make: [0, 2**62]
        raise ProtocolError(f"Input {name!r}: numpy has no {datatype} of shape {shape}.") from None


def bytes_tensor(items: list[str]) -> bytes:
    """The binary form of a BYTES tensor."""
    out = bytearray()
    for item in items:
        data = item.encode("utf-8")
        out += struct.pack("<I", len(data)) + data
    return bytes(out)


def encode_response(response: dict, outputs: dict, binary: set[str]) -> tuple[bytes, int | None]:
    """`(body, JSON header length or None)` of an infer response. `outputs` maps names to
    a list of str (BYTES) or a numpy array; those named in `binary` go as binary data."""
    tensors, chunks = [], []
    for name, value in outputs.items():
        if isinstance(value, list):
            entry = {"name": name, "datatype": "BYTES", "shape": [len(value)]}
            raw = bytes_tensor(value) if name in binary else None
            data = value
        else:
            value = np.ascontiguousarray(value)
            datatype = next(k for k, v in DTYPES.items() if np.dtype(v) == value.dtype)
            entry = {"name": name, "datatype": datatype, "shape": list(value.shape)}
            raw = value.astype(value.dtype.newbyteorder("<")).tobytes() if name in binary else None
            data = value.reshape(-1).tolist()
        if raw is None:
            entry["data"] = data
        else:
            entry["parameters"] = {"binary_data_size": len(raw)}
            chunks.append(raw)
        tensors.append(entry)
    header = json.dumps({**response, "outputs": tensors}).encode()
    if not chunks:
        return header, None
    return header + b"".join(chunks), len(header)


def binary_outputs(request: dict, names: list[str]) -> tuple[list[str], set[str]]:
    """`(outputs to return, the ones to return as binary)`: the request's `outputs` (or
    all of `names`), binary where it asks (`binary_data`, or `binary_data_output` for the
    whole request, which tritonclient sets when it names no outputs), each a JSON
    boolean. An output takes no other parameter: Triton's `classification`
    (tritonclient's `class_count`), whose extension this server does not implement, is
    refused by name, as is any other, rather than answered as if not asked."""
    everything = (request.get("parameters") or {}).get("binary_data_output")
    everything = _flag(everything, "binary_data_output", "The request's")
    asked = request.get("outputs")
    if not asked:
        return list(names), set(names) if everything else set()
    if not isinstance(asked, list) or not all(isinstance(o, dict) and "name" in o for o in asked):
        raise ProtocolError('`outputs` must be a list of {"name": ...} objects.')
    chosen, binary = [], set()
    for output in asked:
        if output["name"] not in names:
            raise ProtocolError(
                f"Unknown output {output['name']!r}; this model gives {', '.join(names)}."
            )
        if output["name"] in chosen:
            raise ProtocolError(f"Output {output['name']!r} is asked for twice.")
        whose = f"Output {output['name']!r}:"
        _check_parameters(output, whose)
        parameters = output.get("parameters") or {}
        if "classification" in parameters:
            raise ProtocolError(
                f"{whose} `classification` (Triton's classification extension, tritonclient's "
                "`class_count`) is not implemented: ask for `label` and `probabilities`."
            )
        unknown = sorted(set(parameters) - {"binary_data"})
        if unknown:
            raise ProtocolError(
                f"{whose} unknown parameter {unknown[0]!r}; an output takes binary_data."
            )
        chosen.append(output["name"])
        if _flag(parameters.get("binary_data"), "binary_data", whose, everything):
            binary.add(output["name"])
    return chosen, binary


def _flag(value, name: str, whose: str, default: bool = False) -> bool:
    """A boolean parameter: JSON's `true` or `false` (null or absent: `default`), never
    a string or a number read as one (`"no"` was true)."""
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ProtocolError(f"{whose} `{name}` must be true or false. Received: {value!r}")
    return value
