"""Rebuilds data/corpus.txt from Debian's r-cran-janeaustenr package, without R.

    apt-get download r-cran-janeaustenr     # 1.0.0-1 in Debian 12
    pip install rdata
    python3 data/make_corpus.py r-cran-janeaustenr_1.0.0-1_all.deb data/corpus.txt

The package stores each novel as an R character vector, one element per line
of text, in R's lazy-load database (data/Rdata.rdx names each object's offset
and length in data/Rdata.rdb, where it sits zlib-compressed behind a 4-byte
length). The novels are written one line per element, two blank lines apart.
"""
import subprocess
import sys
import tempfile
import warnings
import zlib
from pathlib import Path

import rdata

# rdata warns that Rdata.rdx lacks the .rds extension; it is an RDS stream all the same.
warnings.filterwarnings("ignore", module="rdata")

NOVELS = ["prideprejudice", "sensesensibility", "persuasion"]


def novel_lines(data_dir, name):
    index = rdata.conversion.convert(rdata.parser.parse_file(data_dir / "Rdata.rdx"))
    offset, length = (int(v) for v in index["variables"][name])
    blob = (data_dir / "Rdata.rdb").read_bytes()[offset:offset + length]
    return list(rdata.conversion.convert(rdata.parser.parse_data(zlib.decompress(blob[4:]))))


def main(deb, output):
    with tempfile.TemporaryDirectory() as root:
        subprocess.run(["dpkg-deb", "-x", deb, root], check=True)
        data_dir = Path(root) / "usr/lib/R/site-library/janeaustenr/data"
        novels = ["\n".join(novel_lines(data_dir, name)) + "\n" for name in NOVELS]
    Path(output).write_text("\n\n".join(novels), encoding="utf-8")


if __name__ == "__main__":
    main(*sys.argv[1:])
