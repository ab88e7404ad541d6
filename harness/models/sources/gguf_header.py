"""Reading a GGUF file's header (metadata and tensor table) without its tensors.

    from harness.models.sources.gguf_header import read_header
    h = read_header("model.gguf")     # GGUFError (a UserError) when damaged
    h.architecture, h.context_length, h.metadata["llama.rope.freq_base"], h.tokenizer_digest

The format (ggml's GGUF, versions 2 and 3; little-endian): b"GGUF", uint32 version, uint64 tensor
count, uint64 key-value count; each key-value is a string key, a uint32 value type and the value
(strings are a uint64 length and UTF-8 bytes; arrays a uint32 element type, a uint64 count and the
elements); each tensor entry is a string name, a uint32 dimension count, uint64 dimensions, a
uint32 ggml type and a uint64 offset into the data section, which starts at the next multiple of
`general.alignment` (default 32) after the tensor table. A tensor of type t holds
elements / block_size(t) * type_size(t) bytes (gguf.constants.GGML_QUANT_SIZES).

The whole file is checked: a header cut short, counts or lengths that run past the end, an
unknown value type, or tensor data that ends beyond the file (a truncated copy) is named here,
before transformers reads anything. Reading the SmolLM2 GGUF's header (98k tokenizer strings)
takes about 0.1 s.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import UserError

MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
# value type -> struct format of a scalar (8: string, 9: array)
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
_SHORT_ARRAY = 64  # longer arrays (token lists) are not kept as values: only their type and length


class GGUFError(UserError):
    """The file is not a readable GGUF file."""


@dataclass
class TensorInfo:
    name: str
    shape: tuple[int, ...]  # ggml order: the fastest-moving dimension first
    ggml_type: int
    offset: int


@dataclass
class GGUFHeader:
    path: Path
    version: int
    metadata: dict  # key -> scalar, string, short list, or ("array", element type, length) for long arrays
    tensors: list[TensorInfo]
    data_start: int
    tokenizer_digest: str  # sha256 of the raw bytes of every tokenizer.* key-value, in file order
    size: int

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", ""))

    def arch_value(self, key: str):
        """`{architecture}.{key}` (e.g. context_length, rope.freq_base), None when absent."""
        return self.metadata.get(f"{self.architecture}.{key}")

    @property
    def context_length(self) -> int | None:
        value = self.arch_value("context_length")
        return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


class _Cursor:
    def __init__(self, buf, path: Path):
        self.buf, self.pos, self.path = buf, 0, path

    def fail(self, why: str) -> GGUFError:
        return GGUFError(f"{self.path} is damaged or not a GGUF file ({why}): re-download it, or pass another model")

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise self.fail(f"its header runs past the end of the file at byte {self.pos}")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return bytes(out)

    def unpack(self, fmt: str):
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.buf):
            raise self.fail(f"its header runs past the end of the file at byte {self.pos}")
        value = struct.unpack_from(fmt, self.buf, self.pos)[0]
        self.pos += size
        return value

    def string(self) -> str:
        n = self.unpack("<Q")
        raw = self.take(n)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"a string at byte {self.pos - n} is not UTF-8") from None

    def skip_strings(self, count: int) -> None:
        """Step over `count` strings (a token list: tens of thousands; one tight loop)."""
        buf, pos, end = self.buf, self.pos, len(self.buf)
        read_len = struct.Struct("<Q").unpack_from
        for _ in range(count):
            if pos + 8 > end:  # also after a length that ran past the end
                self.pos = min(pos, end)
                raise self.fail(f"its header runs past the end of the file at byte {self.pos}")
            pos += 8 + read_len(buf, pos)[0]
        if pos > end:
            self.pos = end
            raise self.fail(f"its header runs past the end of the file at byte {end}")
        self.pos = pos

    def value(self, vtype: int, keep: bool):
        if vtype in _SCALARS:
            return self.unpack(_SCALARS[vtype])
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            etype = self.unpack("<I")
            count = self.unpack("<Q")
            if count > len(self.buf):
                raise self.fail(f"an array claims {count} elements")
            if etype in _SCALARS:
                size = struct.calcsize(_SCALARS[etype])
                raw = self.take(size * count)
                if keep and count <= _SHORT_ARRAY:
                    return list(struct.unpack("<" + _SCALARS[etype][1] * count, raw))
                return ("array", etype, count)
            if etype == _STRING:
                if keep and count <= _SHORT_ARRAY:
                    return [self.string() for _ in range(count)]
                self.skip_strings(count)
                return ("array", etype, count)
            if etype == _ARRAY:  # nested arrays: rare; walk them
                items = [self.value(_ARRAY, keep) for _ in range(count)]
                return items if keep and count <= _SHORT_ARRAY else ("array", etype, count)
            raise self.fail(f"unknown array element type {etype}")
        raise self.fail(f"unknown value type {vtype}")


def _quant_sizes() -> dict[int, tuple[int, int]]:
    try:
        from gguf.constants import GGML_QUANT_SIZES
    except ImportError:
        raise UserError("reading GGUF files needs the gguf package: run `bash scripts/setup.sh`") from None
    return {int(k): v for k, v in GGML_QUANT_SIZES.items()}


def read_header(path: str | Path) -> GGUFHeader:
    """The header of a GGUF file, checked against the file's size (see the module docstring)."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < 24:
                raise GGUFError(f"{path} is damaged or not a GGUF file ({size} bytes): re-download it")
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                return _parse(buf, path, size)
    except OSError as exc:
        raise GGUFError(f"cannot read {path} ({exc.strerror}): check the path and its permissions") from None


def _parse(buf, path: Path, size: int) -> GGUFHeader:
    cur = _Cursor(buf, path)
    if cur.take(4) != MAGIC:
        raise cur.fail("it does not start with GGUF")
    version = cur.unpack("<I")
    if version not in (2, 3):
        swapped = struct.unpack(">I", struct.pack("<I", version))[0]
        why = "big-endian files are not read" if swapped in (2, 3) else f"unsupported version {version}"
        raise cur.fail(why)
    n_tensors = cur.unpack("<Q")
    n_kv = cur.unpack("<Q")
    if n_tensors > size or n_kv > size:
        raise cur.fail(f"it claims {n_tensors} tensors and {n_kv} metadata entries")
    metadata: dict = {}
    tok = hashlib.sha256()
    for _ in range(n_kv):
        start = cur.pos
        key = cur.string()
        vtype = cur.unpack("<I")
        is_tokenizer = key.startswith("tokenizer.")
        metadata[key] = cur.value(vtype, keep=True)
        if is_tokenizer:
            tok.update(bytes(buf[start : cur.pos]))
    tensors = []
    for _ in range(n_tensors):
        name = cur.string()
        n_dims = cur.unpack("<I")
        if n_dims > 8:
            raise cur.fail(f"tensor {name!r} has {n_dims} dimensions")
        shape = tuple(cur.unpack("<Q") for _ in range(n_dims))
        tensors.append(TensorInfo(name, shape, cur.unpack("<I"), cur.unpack("<Q")))
    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or isinstance(alignment, bool) or alignment < 1:
        raise cur.fail(f"general.alignment is {alignment!r}")
    data_start = -(-cur.pos // alignment) * alignment
    if tensors:
        sizes = _quant_sizes()
        end = data_start
        for t in tensors:
            if t.ggml_type not in sizes:
                raise cur.fail(f"tensor {t.name!r} has unknown ggml type {t.ggml_type}")
            block, type_size = sizes[t.ggml_type]
            n = 1
            for d in t.shape:
                n *= d
            if n % block:
                raise cur.fail(f"tensor {t.name!r} of {n} elements does not fill blocks of {block}")
            end = max(end, data_start + t.offset + n // block * type_size)
        if end > size:
            raise GGUFError(
                f"{path} is truncated ({size} of {end} bytes: its tensors run past the end): re-download it"
            )
    if "general.architecture" not in metadata or not isinstance(metadata["general.architecture"], str):
        raise cur.fail("no general.architecture")
    return GGUFHeader(path, version, metadata, tensors, data_start, tok.hexdigest()[:16], size)
