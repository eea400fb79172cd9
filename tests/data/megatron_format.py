"""An independent numpy reader and writer of Megatron's indexed dataset
(.idx/.bin, MMapIndexedDataset), written from the layout alone so that the
C++ implementation is checked against something that is not itself:

    .idx: b"MMIDIDX\\x00\\x00", u64 version (1), u8 dtype code (4 int32, 8 uint16),
          u64 sequence count S, u64 document index length D,
          int32[S] lengths, int64[S] byte offsets into .bin, int64[D] document index
"""
import struct
import sys

try:
    import numpy as np
except ImportError as error:
    sys.exit(f"{error}: run scripts/install-deps.sh (the tests' Python environment)")

MAGIC = b"MMIDIDX\x00\x00"
CODES = {np.dtype(np.int32): 4, np.dtype(np.uint16): 8}
DTYPES = {code: dtype for dtype, code in CODES.items()}


def write(prefix, documents, dtype):
    """documents: a list of documents, each a list of sequences of token ids."""
    dtype = np.dtype(dtype)
    lengths, offsets, document_index = [], [], [0]
    with open(prefix + ".bin", "wb") as bin_file:
        for document in documents:
            for sequence in document:
                offsets.append(bin_file.tell())
                lengths.append(len(sequence))
                bin_file.write(np.asarray(sequence, dtype=dtype).tobytes())
            document_index.append(len(lengths))
    with open(prefix + ".idx", "wb") as idx_file:
        idx_file.write(MAGIC)
        idx_file.write(struct.pack("<QBQQ", 1, CODES[dtype], len(lengths), len(document_index)))
        idx_file.write(np.asarray(lengths, dtype="<i4").tobytes())
        idx_file.write(np.asarray(offsets, dtype="<i8").tobytes())
        idx_file.write(np.asarray(document_index, dtype="<i8").tobytes())


def read(prefix):
    """Returns (dtype, documents) with documents as lists of sequences of ints."""
    raw = np.fromfile(prefix + ".idx", dtype=np.uint8).tobytes()
    assert raw[:9] == MAGIC, f"{prefix}.idx: bad magic"
    version, code, sequences, entries = struct.unpack_from("<QBQQ", raw, 9)
    assert version == 1, f"{prefix}.idx: version {version}"
    dtype = DTYPES[code]
    at = 9 + struct.calcsize("<QBQQ")
    lengths = np.frombuffer(raw, dtype="<i4", count=sequences, offset=at)
    offsets = np.frombuffer(raw, dtype="<i8", count=sequences, offset=at + 4 * sequences)
    document_index = np.frombuffer(raw, dtype="<i8", count=entries, offset=at + 12 * sequences)
    assert at + 12 * sequences + 8 * entries == len(raw), f"{prefix}.idx: size mismatch"
    tokens = np.memmap(prefix + ".bin", dtype=np.uint8, mode="r")
    def sequence(s):
        start = int(offsets[s])
        return np.frombuffer(tokens, dtype=dtype, count=int(lengths[s]), offset=start).tolist()
    documents = [[sequence(s) for s in range(document_index[d], document_index[d + 1])]
                 for d in range(entries - 1)]
    return dtype, documents
