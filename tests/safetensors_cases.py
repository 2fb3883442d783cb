#!/usr/bin/env python3
"""Safetensors files for tests/test_safetensors.c, written with numpy,
struct and json (not with kiln, not with the safetensors package), and a
manifest on stdout of what reading each must give.

usage: safetensors_cases.py DIR

Manifest lines (values as float.hex(), exact):
  tensor FILE NAME DTYPE RANK D0 .. | V0 V1 ..   a tensor kiln must read
  bind FILE | X0 .. | Y0 ..                      y = W @ x + b on FILE's
                                                 w.proj and bias
  error FILE CODE TEXT                           opening FILE fails with
                                                 kiln code CODE, a message
                                                 containing TEXT
  geterror FILE NAME CODE TEXT                   opening works, reading
                                                 tensor NAME fails
"""
import json
import os
import struct
import sys

try:
    import numpy as np
except ImportError:
    print("SKIP numpy is not installed")
    sys.exit(0)

OUT = sys.argv[1]
rng = np.random.default_rng(29)
ITEM = {"F64": 8, "F32": 4, "I64": 8, "I32": 4, "BOOL": 1, "F16": 2,
        "BF16": 2, "U8": 1}


def write(name, header, data, raw_header=None, length=None):
    """FILE: 8-byte length, the header (json.dumps unless raw), data."""
    h = raw_header if raw_header is not None else \
        json.dumps(header, separators=(",", ":")).encode()
    # pad the header with spaces to 8 bytes, as the format's writer does
    h += b" " * (-len(h) % 8)
    n = len(h) if length is None else length
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(struct.pack("<Q", n) + h + data)


def pack(tensors):
    """{name: (dtype, shape, bytes)} -> (header, data), in order."""
    header, data = {"__metadata__": {"format": "pt"}}, b""
    for name, (dt, shape, raw) in tensors.items():
        header[name] = {"dtype": dt, "shape": list(shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    return header, data


def hexes(a):
    return " ".join(float(v).hex() for v in np.asarray(a, np.float64).ravel())


def emit_tensor(file, name, kdt, arr):
    shape = " ".join(str(d) for d in arr.shape)
    print(f"tensor {file} {name} {kdt} {arr.ndim} {shape} | {hexes(arr)}")


# ---- a good file: every dtype, conversions, a rank-0 and an empty one ----
f64 = rng.standard_normal((2, 3))
f32 = rng.standard_normal((3, 4)).astype(np.float32)
i64 = np.array([-(2 ** 62), -1, 0, 7, 2 ** 53 - 1], np.int64)
i32 = np.array([[-(2 ** 31), 5], [0, 2 ** 31 - 1]], np.int32)
bo = np.array([True, False, True])
# f16: normals, subnormals, +-0, +-inf, NaN, the largest; numpy's
# float16 -> float32 is the reference
f16 = np.array([1.0, -2.5, 6.1e-5, 5.96e-8, -5.96e-8, 3.0e-6, 0.0, -0.0,
                np.inf, -np.inf, 65504.0, 0.333], np.float16)
# bf16: float32 values whose low 16 bits are zero are bf16 exactly; the
# file holds their high halves, the reference is the float32 itself
b32 = rng.standard_normal(10).astype(np.float32)
b32 = np.concatenate([b32, np.array([np.inf, -np.inf, 0.0, -0.0, 1e-40],
                                    np.float32)])
b32 = (b32.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
bf16_raw = (b32.view(np.uint32) >> 16).astype("<u2").tobytes()
scalar = np.array(3.25, np.float32)
empty = np.zeros((0, 4), np.float32)
good = {
    "a.f64": ("F64", f64.shape, f64.astype("<f8").tobytes()),
    "b.f32": ("F32", f32.shape, f32.astype("<f4").tobytes()),
    "c.i64": ("I64", i64.shape, i64.astype("<i8").tobytes()),
    "d.i32": ("I32", i32.shape, i32.astype("<i4").tobytes()),
    "e.bool": ("BOOL", bo.shape, bo.astype(np.uint8).tobytes()),
    "f.f16": ("F16", f16.shape, f16.astype("<f2").tobytes()),
    "g.bf16": ("BF16", b32.shape, bf16_raw),
    "h.scalar": ("F32", (), scalar.astype("<f4").tobytes()),
    "i.empty": ("F32", (0, 4), b""),
}
header, data = pack(good)
write("good.safetensors", header, data)
emit_tensor("good.safetensors", "a.f64", "f64", f64)
emit_tensor("good.safetensors", "b.f32", "f32", f32)
emit_tensor("good.safetensors", "c.i64", "i64", i64)
emit_tensor("good.safetensors", "d.i32", "i32", i32)
emit_tensor("good.safetensors", "e.bool", "bool", bo)
emit_tensor("good.safetensors", "f.f16", "f32", f16.astype(np.float32))
emit_tensor("good.safetensors", "g.bf16", "f32", b32)
emit_tensor("good.safetensors", "h.scalar", "f32", scalar)
emit_tensor("good.safetensors", "i.empty", "f32", empty)

# NaN in f16 and bf16 stays NaN (compared as NaN, not by payload)
nan16 = np.array([np.nan, 1.0], np.float16)
nanb = np.array([np.nan, 2.0], np.float32)
header, data = pack({
    "n16": ("F16", (2,), nan16.astype("<f2").tobytes()),
    "nbf": ("BF16", (2,), (nanb.view(np.uint32) >> 16).astype("<u2")
            .tobytes())})
write("nan.safetensors", header, data)
emit_tensor("nan.safetensors", "n16", "f32", nan16.astype(np.float32))
emit_tensor("nan.safetensors", "nbf", "f32", nanb)

# a misaligned f64 tensor (offset 4): read through a copy, same values
mis = rng.standard_normal(3)
header = {"pad": {"dtype": "I32", "shape": [1], "data_offsets": [0, 4]},
          "mis": {"dtype": "F64", "shape": [3], "data_offsets": [4, 28]}}
# the JSON length (padded to 8) keeps the data region 8-aligned: offset
# 4 in it is misaligned for f64
write("misaligned.safetensors", header,
      np.array([9], "<i4").tobytes() + mis.astype("<f8").tobytes())
emit_tensor("misaligned.safetensors", "mis", "f64", mis)

# ---- binding: y = W @ x + b, names with dots (HF style) -------------------
W = rng.standard_normal((4, 6)).astype(np.float32)
b = rng.standard_normal(4).astype(np.float32)
x = rng.standard_normal(6).astype(np.float32)
header, data = pack({
    "model.w.proj": ("F32", W.shape, W.astype("<f4").tobytes()),
    "model.bias": ("BF16", b.shape,
                   (((b.view(np.uint32) & np.uint32(0xFFFF0000)) >> 16)
                    .astype("<u2").tobytes())),
    "unused.tensor": ("I64", (2,), np.arange(2, dtype="<i8").tobytes())})
write("bind.safetensors", header, data)
bt = (b.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
y = W.astype(np.float64) @ x.astype(np.float64) + bt
print(f"bind bind.safetensors | {hexes(x)} | {hexes(y)}")

# two tensors that bind one name; a tensor of the wrong dtype / shape
header, data = pack({
    "model.w.proj": ("F32", W.shape, W.astype("<f4").tobytes()),
    "model_w.proj": ("F32", W.shape, W.astype("<f4").tobytes()),
    "model.bias": ("F32", (4,), b.astype("<f4").tobytes())})
write("clash.safetensors", header, data)
header, data = pack({
    "model.w.proj": ("F64", W.shape, W.astype("<f8").tobytes()),
    "model.bias": ("F32", (4,), b.astype("<f4").tobytes())})
write("wrongtype.safetensors", header, data)
header, data = pack({
    "model.w.proj": ("F32", (6, 4), W.T.astype("<f4").tobytes()),
    "model.bias": ("F32", (4,), b.astype("<f4").tobytes())})
write("wrongshape.safetensors", header, data)
header, data = pack({
    "model.w.proj": ("F32", W.shape, W.astype("<f4").tobytes()),
    "model.bais": ("F32", (4,), b.astype("<f4").tobytes())})
write("typo.safetensors", header, data)

# ---- errors ------------------------------------------------------------
one = {"w": ("F32", (2,), np.ones(2, "<f4").tobytes())}


def bad(name, code, text, header=None, data=b"", **kw):
    write(name, header, data, **kw)
    print(f"error {name} {code} {text}")


with open(os.path.join(OUT, "short.safetensors"), "wb") as f:
    f.write(b"\x05\x00\x00")
print("error short.safetensors PARSE truncated: 3 bytes")
bad("hugeheader.safetensors", "PARSE", "over the format's limit",
    raw_header=b"{}", length=200_000_000)
bad("cutheader.safetensors", "PARSE", "but only 8 bytes follow",
    raw_header=b"{}", length=4096)
bad("notjson.safetensors", "PARSE", "notjson.safetensors:1:",
    raw_header=b"{\"w\": [1,}")
bad("toplist.safetensors", "PARSE", "the top level must be an object",
    raw_header=b"[1, 2]")
bad("dupkey.safetensors", "PARSE", "duplicate key 'w'",
    raw_header=b'{"w":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},'
               b'"w":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}')
# a duplicate key inside a tensor entry (json-c keeps the last: I32);
# and in the metadata
bad("dupinner.safetensors", "PARSE", "1:21: duplicate key 'dtype'",
    raw_header=b'{"w":{"dtype":"F32","dtype":"I32","shape":[2],'
               b'"data_offsets":[0,8]}}')
bad("dupmeta.safetensors", "PARSE", "duplicate key 'a'",
    raw_header=b'{"__metadata__":{"a":"x","a":"y"}}')
# the same key in two objects is no duplicate
with open(os.path.join(OUT, "samekeys.safetensors"), "wb") as f:
    hh = (b'{"__metadata__":{"dtype":"x"},"w":{"dtype":"F32","shape":[2],'
          b'"data_offsets":[0,8]}}')
    hh += b" " * (-len(hh) % 8)
    f.write(struct.pack("<Q", len(hh)) + hh +
            np.array([1.5, -2.0], "<f4").tobytes())
emit_tensor("samekeys.safetensors", "w", "f32",
            np.array([1.5, -2.0], np.float32))
# a dtype with an embedded NUL is not F32
bad("dtypenul.safetensors", "PARSE", "tensor 'w': dtype has a NUL character",
    raw_header=b'{"w":{"dtype":"F32\\u0000x","shape":[2],'
               b'"data_offsets":[0,8]}}')
h, d = pack({"w": ("U8", (2,), b"\x01\x02")})
bad("u8.safetensors", "PARSE", "unsupported dtype 'U8' (kiln reads F64, "
    "F32, I64, I32, BOOL, and F16/BF16 converted to f32; convert the file",
    h, d)
h, d = pack({"w": ("F32", (1,) * 9, np.ones(1, "<f4").tobytes())})
bad("rank9.safetensors", "PARSE", "rank 9 exceeds KILN_MAX_RANK (8)", h, d)
h, d = pack({"w": ("F32", (4, 2), np.ones(4, "<f4").tobytes())})
bad("count.safetensors", "PARSE", "data_offsets [0, 16] give 16 bytes, but "
    "F32 (4, 2) needs 32", h, d)
h, d = pack(one)
h["w"]["data_offsets"] = [0, 8]
bad("outside.safetensors", "PARSE", "data_offsets [0, 8] lie outside the 4 "
    "bytes of data", h, d[:4])
h, d = pack({"a": ("F32", (2,), np.ones(2, "<f4").tobytes()),
             "b": ("F32", (2,), np.ones(2, "<f4").tobytes())})
h["b"]["data_offsets"] = [4, 12]
bad("overlap.safetensors", "PARSE", "tensors 'a' and 'b' overlap (bytes "
    "[0, 8) and [4, 12))", h, d + b"\0" * 4)
h, d = pack(one)
h["w"]["data_offsets"] = [8, 0]
bad("backwards.safetensors", "PARSE", "data_offsets must be [begin, end]",
    h, d)
h, d = pack(one)
h["w"]["extra"] = 1
bad("extrakey.safetensors", "PARSE", "unexpected key 'extra'", h, d)
h, d = pack(one)
del h["w"]["shape"]
bad("noshape.safetensors", "PARSE", "tensor 'w': no shape", h, d)
h, d = pack(one)
h["w"]["shape"] = [-2]
bad("negdim.safetensors", "PARSE", "shape entry 0 is not a non-negative "
    "integer", h, d)
h, d = pack({"m": ("BOOL", (3,), b"\x01\x02\x00")})
write("badbool.safetensors", h, d)
print("geterror badbool.safetensors m PARSE bool element 1 has byte value 2")
h, d = pack(one)
write("one.safetensors", h, d)
print("geterror one.safetensors w2 NAME no tensor 'w2'; did you mean 'w'?")
