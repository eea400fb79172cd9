"""The C++ indexed dataset against an independent numpy implementation of the
Megatron layout: what numpy writes, C++ reads token for token, and the other
way round, for uint16 and int32 tokens."""
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import megatron_format

# Several sequences per document (Megatron's sentence splitting), an empty
# sequence, an empty document, and ids at the edges of each dtype.
DOCUMENTS = {
    "uint16": [[[0, 1, 2], [65535, 7]], [[5]], [], [[], [9, 9, 9, 256]]],
    "int32": [[[0, 2147483647, 65536]], [[1, 2], [3]], [[70000] * 5]],
}


def run_tool(tool, *args, stdin=None):
    result = subprocess.run([tool, *args], input=stdin, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{tool} {' '.join(args)} failed:\n{result.stderr}")
    return json.loads(result.stdout)


def check_cpp_reads_numpy(tool, folder, dtype, documents):
    prefix = str(folder / f"numpy_{dtype}")
    megatron_format.write(prefix, documents, dtype)
    got = run_tool(tool, "read", prefix)
    assert got["dtype"] == dtype, f"C++ read dtype {got['dtype']}, numpy wrote {dtype}"
    assert got["documents"] == documents, f"C++ read {got['documents']}, numpy wrote {documents}"


def check_numpy_reads_cpp(tool, folder, dtype, documents):
    # The C++ writer makes one sequence per document.
    flat = [[token for sequence in document for token in sequence] for document in documents]
    prefix = str(folder / f"cpp_{dtype}")
    run_tool(tool, "write", prefix, dtype, stdin=json.dumps(flat))
    got_dtype, got = megatron_format.read(prefix)
    assert str(got_dtype) == dtype, f"numpy read dtype {got_dtype}, C++ wrote {dtype}"
    assert got == [[tokens] for tokens in flat], f"numpy read {got}, C++ wrote {flat}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tool", required=True)
    tool = parser.parse_args().tool
    with tempfile.TemporaryDirectory() as folder:
        for dtype, documents in DOCUMENTS.items():
            check_cpp_reads_numpy(tool, Path(folder), dtype, documents)
            check_numpy_reads_cpp(tool, Path(folder), dtype, documents)
    print("indexed dataset: C++ and numpy agree both ways for uint16 and int32")


if __name__ == "__main__":
    main()
