"""The part of the ONNX file format the MiniLM graph builder reads and writes, on plain protobuf.

onnxruntime needs `protobuf` but not the `onnx` package, whose generated classes are the usual way to
read a model. The messages here are declared with ONNX's own field numbers (onnx/onnx.proto, proto2),
for the fields this project uses; a file written with them is an ONNX file onnxruntime loads, and
fields they do not declare survive a read as protobuf's unknown fields.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, BinaryIO

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message, message_factory  # type: ignore[import-untyped]
from numpy.typing import NDArray

FLOAT, INT32, INT64, INT8 = 1, 6, 7, 3
"""TensorProto's data types used here (onnx.proto `TensorProto.DataType`)."""

_NUMPY_OF = {FLOAT: np.float32, INT32: np.int32, INT64: np.int64, INT8: np.int8, 2: np.uint8, 9: np.bool_}
_ATTRIBUTE_INT, _ATTRIBUTE_FLOAT, _ATTRIBUTE_STRING, _ATTRIBUTE_INTS = 2, 1, 3, 7

_F = descriptor_pb2.FieldDescriptorProto
_MESSAGES: dict[str, list[tuple[str, int, int, int, str]]] = {
    # message: [(field, number, label, type, message type of a message field)]
    "ModelProto": [
        ("ir_version", 1, _F.LABEL_OPTIONAL, _F.TYPE_INT64, ""),
        ("producer_name", 2, _F.LABEL_OPTIONAL, _F.TYPE_STRING, ""),
        ("graph", 7, _F.LABEL_OPTIONAL, _F.TYPE_MESSAGE, "GraphProto"),
        ("opset_import", 8, _F.LABEL_REPEATED, _F.TYPE_MESSAGE, "OperatorSetIdProto"),
    ],
    "OperatorSetIdProto": [
        ("domain", 1, _F.LABEL_OPTIONAL, _F.TYPE_STRING, ""),
        ("version", 2, _F.LABEL_OPTIONAL, _F.TYPE_INT64, ""),
    ],
    "GraphProto": [
        ("node", 1, _F.LABEL_REPEATED, _F.TYPE_MESSAGE, "NodeProto"),
        ("name", 2, _F.LABEL_OPTIONAL, _F.TYPE_STRING, ""),
        ("initializer", 5, _F.LABEL_REPEATED, _F.TYPE_MESSAGE, "TensorProto"),
        ("input", 11, _F.LABEL_REPEATED, _F.TYPE_MESSAGE, "ValueInfoProto"),
        ("output", 12, _F.LABEL_REPEATED, _F.TYPE_MESSAGE, "ValueInfoProto"),
    ],
    "NodeProto": [
        ("input", 1, _F.LABEL_REPEATED, _F.TYPE_STRING, ""),
        ("output", 2, _F.LABEL_REPEATED, _F.TYPE_STRING, ""),
        ("name", 3, _F.LABEL_OPTIONAL, _F.TYPE_STRING, ""),
        ("op_type", 4, _F.LABEL_OPTIONAL, _F.TYPE_STRING, ""),
        ("attribute", 5, _F.LABEL_REPEATED, _F.TYPE_MESSAGE, "AttributeProto"),
        ("domain", 7, _F.LABEL_OPTIONAL, _F.TYPE_STRING, ""),
    ],
    "AttributeProto": [
        ("name", 1, _F.LABEL_OPTIONAL, _F.TYPE_STRING, ""),
        ("f", 2, _F.LABEL_OPTIONAL, _F.TYPE_FLOAT, ""),
        ("i", 3, _F.LABEL_OPTIONAL, _F.TYPE_INT64, ""),
        ("s", 4, _F.LABEL_OPTIONAL, _F.TYPE_BYTES, ""),
        ("ints", 8, _F.LABEL_REPEATED, _F.TYPE_INT64, ""),
        ("type", 20, _F.LABEL_OPTIONAL, _F.TYPE_INT32, ""),
    ],
    "TensorProto": [
        ("dims", 1, _F.LABEL_REPEATED, _F.TYPE_INT64, ""),
        ("data_type", 2, _F.LABEL_OPTIONAL, _F.TYPE_INT32, ""),
        ("float_data", 4, _F.LABEL_REPEATED, _F.TYPE_FLOAT, ""),
        ("int32_data", 5, _F.LABEL_REPEATED, _F.TYPE_INT32, ""),
        ("int64_data", 7, _F.LABEL_REPEATED, _F.TYPE_INT64, ""),
        ("name", 8, _F.LABEL_OPTIONAL, _F.TYPE_STRING, ""),
        ("raw_data", 9, _F.LABEL_OPTIONAL, _F.TYPE_BYTES, ""),
    ],
    "ValueInfoProto": [
        ("name", 1, _F.LABEL_OPTIONAL, _F.TYPE_STRING, ""),
        ("type", 2, _F.LABEL_OPTIONAL, _F.TYPE_MESSAGE, "TypeProto"),
    ],
    "TypeProto": [("tensor_type", 1, _F.LABEL_OPTIONAL, _F.TYPE_MESSAGE, "TypeProto.Tensor")],
    "TypeProto.Tensor": [
        ("elem_type", 1, _F.LABEL_OPTIONAL, _F.TYPE_INT32, ""),
        ("shape", 2, _F.LABEL_OPTIONAL, _F.TYPE_MESSAGE, "TensorShapeProto"),
    ],
    "TensorShapeProto": [("dim", 1, _F.LABEL_REPEATED, _F.TYPE_MESSAGE, "TensorShapeProto.Dimension")],
    "TensorShapeProto.Dimension": [
        ("dim_value", 1, _F.LABEL_OPTIONAL, _F.TYPE_INT64, ""),
        ("dim_param", 2, _F.LABEL_OPTIONAL, _F.TYPE_STRING, ""),
    ],
}
_PACKAGE = "tinymemory.onnx"  # a package of its own, so it never clashes with the `onnx` package's classes


def _message_classes() -> dict[str, Any]:
    file = descriptor_pb2.FileDescriptorProto(name="tinymemory_onnx_subset.proto", package=_PACKAGE, syntax="proto2")
    for name, fields in _MESSAGES.items():
        outer, _, inner = name.partition(".")
        holder = next((m for m in file.message_type if m.name == outer), None) or file.message_type.add(name=outer)
        message = holder.nested_type.add(name=inner) if inner else holder
        for field, number, label, kind, type_name in fields:
            declared = message.field.add(name=field, number=number, label=label, type=kind)
            if type_name:
                declared.type_name = f".{_PACKAGE}.{type_name}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}")) for name in _MESSAGES
    }


_CLASSES = _message_classes()
Model: Any = _CLASSES["ModelProto"]
Tensor: Any = _CLASSES["TensorProto"]


class ModelFormatError(ValueError):
    """The bytes are not an ONNX model, or not one this project can rebuild."""


def read_model(data: bytes) -> Any:
    """The ModelProto in `data`."""
    model = Model()
    try:
        model.ParseFromString(data)
    except message.DecodeError as err:
        raise ModelFormatError(f"not an ONNX model: {err}") from err
    return model


def to_array(tensor: Any) -> NDArray[Any]:
    """A TensorProto's values, as numpy holds them (a copy)."""
    dtype = _NUMPY_OF[tensor.data_type]
    shape = tuple(tensor.dims)
    if tensor.raw_data:
        return np.frombuffer(tensor.raw_data, dtype=dtype).reshape(shape).copy()
    typed = {FLOAT: tensor.float_data, INT64: tensor.int64_data}.get(tensor.data_type, tensor.int32_data)
    return np.array(list(typed), dtype=dtype).reshape(shape)


def node(op_type: str, inputs: list[str], outputs: list[str], domain: str = "", **attributes: object) -> Any:
    """A NodeProto; attributes are ints, floats, strings or lists of ints."""
    made = _CLASSES["NodeProto"](op_type=op_type, input=inputs, output=outputs, domain=domain, name=outputs[0])
    for key, value in sorted(attributes.items()):
        attribute = made.attribute.add(name=key)
        if isinstance(value, bool | int):
            attribute.i, attribute.type = int(value), _ATTRIBUTE_INT
        elif isinstance(value, float):
            attribute.f, attribute.type = value, _ATTRIBUTE_FLOAT
        elif isinstance(value, str):
            attribute.s, attribute.type = value.encode(), _ATTRIBUTE_STRING
        else:
            attribute.ints.extend(value)
            attribute.type = _ATTRIBUTE_INTS
    return made


def value_info(name: str, elem_type: int, dims: list[int | str]) -> Any:
    """A graph input or output: its element type and shape (a str names a dimension left free)."""
    info = _CLASSES["ValueInfoProto"](name=name)
    info.type.tensor_type.elem_type = elem_type
    for dim in dims:
        added = info.type.tensor_type.shape.dim.add()
        if isinstance(dim, str):
            added.dim_param = dim
        else:
            added.dim_value = dim
    return info


def write_model(out: BinaryIO, model: Any, initializers: Iterable[tuple[str, NDArray[Any]]]) -> None:
    """Write `model` with `initializers` added to its graph, one tensor at a time.

    A model serialised whole is held twice (message and bytes); written this way, the file's only
    copy in memory is the arrays the caller holds. Protobuf fields may come in any order and a
    message's repeated field may be split, so the graph is its own fields, then each initializer.
    """
    entries = [(_header(name, array), np.ascontiguousarray(array)) for name, array in initializers]
    graph = model.graph.SerializeToString()
    sizes = [len(header) + _length_prefixed(array.nbytes) for header, array in entries]
    graph_size = len(graph) + sum(_length_prefixed(size) for size in sizes)
    rest = _without_graph(model)
    out.write(rest + _GRAPH_TAG + _varint(graph_size) + graph)
    for (header, array), size in zip(entries, sizes, strict=True):
        out.write(_INITIALIZER_TAG + _varint(size) + header + _RAW_DATA_TAG + _varint(array.nbytes))
        out.write(array.data)


# Wire tags (field number << 3 | 2, a length-prefixed field): ModelProto.graph, GraphProto.initializer,
# TensorProto.raw_data.
_GRAPH_TAG, _INITIALIZER_TAG, _RAW_DATA_TAG = bytes([7 << 3 | 2]), bytes([5 << 3 | 2]), bytes([9 << 3 | 2])


def _without_graph(model: Any) -> bytes:
    """The model's fields but its graph, serialised."""
    rest = Model()
    rest.CopyFrom(model)
    rest.ClearField("graph")
    return rest.SerializeToString()  # type: ignore[no-any-return]


def _header(name: str, array: NDArray[Any]) -> bytes:
    """A TensorProto's fields but its data."""
    data_type = next(code for code, dtype in _NUMPY_OF.items() if np.dtype(dtype) == array.dtype)
    return Tensor(name=name, dims=list(array.shape), data_type=data_type).SerializeToString()  # type: ignore[no-any-return]


def _length_prefixed(size: int) -> int:
    return 1 + len(_varint(size)) + size


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)
