"""scripts/unpack_bundle.py: what it unpacks from a GPU build bundle, and what it refuses.

    python3 unpack_bundle_test.py SCRIPT

The packages are made here, in the .deb layout (an ar archive of debian-binary,
control.tar.xz and data.tar.xz), so the test needs neither dpkg nor a network.
"""
import hashlib
import io
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
import unittest
from pathlib import Path

SCRIPT = None
ARCHITECTURE = {"x86_64": "amd64", "aarch64": "arm64"}[platform.machine()]


def tar_xz(entries):
    """A tar.xz of entries: (path, bytes) files, (path, "->", target) links."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz") as tar:
        for entry in entries:
            info = tarfile.TarInfo(entry[0])
            if len(entry) == 3:
                info.type, info.linkname = tarfile.SYMTYPE, entry[2]
                tar.addfile(info)
            else:
                info.size, info.mode = len(entry[1]), 0o644
                tar.addfile(info, io.BytesIO(entry[1]))
    return buffer.getvalue()


def deb(data_entries, postinst=None):
    control = [("./control", b"Package: test\n")] + ([("./postinst", postinst.encode())] if postinst else [])
    members = [("debian-binary", b"2.0\n"), ("control.tar.xz", tar_xz(control)), ("data.tar.xz", tar_xz(data_entries))]
    out = bytearray(b"!<arch>\n")
    for name, blob in members:
        out += f"{name:<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(blob):<10}`\n".encode()
        out += blob + (b"\n" if len(blob) % 2 else b"")
    return bytes(out)


def write_bundle(folder, packages, architecture=ARCHITECTURE, glibc="2.17"):
    """A bundle of {file name: .deb bytes}, with its manifest."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["# test bundle", f"distribution\tDebian GNU/Linux 12 (bookworm)", f"architecture\t{architecture}",
             f"glibc\t{glibc}"]
    for name, blob in packages.items():
        (folder / name).write_bytes(blob)
        lines.append(f"package\t{name.split('_')[0]}\t1.0\t{name}\t{len(blob)}\t{hashlib.sha256(blob).hexdigest()}")
    (folder / "manifest.txt").write_text("\n".join(lines) + "\n")


def unpack(bundle, prefix):
    return subprocess.run([sys.executable, SCRIPT, str(bundle), str(prefix)], capture_output=True, text=True)


ALTERNATIVES = """#!/bin/sh
set -e
update-alternatives --install /usr/lib/x86_64-linux-gnu/libblas.so \\
                    libblas.so-x86_64-linux-gnu \\
                    /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so 100 \\
                    --slave /usr/include/x86_64-linux-gnu/cblas.h cblas.h-x86_64-linux-gnu \\
                    /usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h
"""


class UnpackBundle(unittest.TestCase):
    def setUp(self):
        self.work = Path(tempfile.mkdtemp())
        self.bundle, self.prefix = self.work / "bundle", self.work / "prefix"

    def tearDown(self):
        subprocess.run(["rm", "-rf", str(self.work)], check=True)

    def test_files_and_links_land_inside_the_prefix_without_documentation(self):
        write_bundle(self.bundle, {"libfoo_1.0_amd64.deb": deb([
            ("./usr/include/foo.h", b"int foo;\n"),
            ("./usr/lib/libfoo.so.1", b"ELF"),
            ("./usr/lib/libfoo.so", "->", "libfoo.so.1"),
            ("./usr/lib/absolute.so", "->", "/usr/lib/libfoo.so.1"),
            ("./usr/share/doc/libfoo/copyright", b"text"),
        ])})
        result = unpack(self.bundle, self.prefix)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual((self.prefix / "usr/include/foo.h").read_bytes(), b"int foo;\n")
        self.assertEqual(os.readlink(self.prefix / "usr/lib/libfoo.so"), "libfoo.so.1")
        self.assertEqual(os.readlink(self.prefix / "usr/lib/absolute.so"), "libfoo.so.1")
        self.assertFalse((self.prefix / "usr/share/doc").exists())

    def test_links_the_postinst_registers_with_update_alternatives_are_made(self):
        write_bundle(self.bundle, {"libblas_1.0_amd64.deb": deb([
            ("./usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so", b"ELF"),
            ("./usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h", b"/* cblas */"),
        ], postinst=ALTERNATIVES)})
        result = unpack(self.bundle, self.prefix)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(os.readlink(self.prefix / "usr/lib/x86_64-linux-gnu/libblas.so"),
                         "openblas-pthread/libblas.so")
        self.assertEqual((self.prefix / "usr/include/x86_64-linux-gnu/cblas.h").read_bytes(), b"/* cblas */")

    def test_a_member_outside_the_prefix_is_refused(self):
        write_bundle(self.bundle, {"evil_1.0_amd64.deb": deb([("./usr/../../escaped", b"x")])})
        result = unpack(self.bundle, self.prefix)
        self.assertEqual(result.returncode, 2)
        self.assertIn("outside", result.stderr)
        self.assertFalse((self.work / "escaped").exists())

    def test_a_link_pointing_outside_the_prefix_is_refused(self):
        write_bundle(self.bundle, {"evil_1.0_amd64.deb": deb([("./usr/lib/passwd", "->", "../../../etc/passwd")])})
        result = unpack(self.bundle, self.prefix)
        self.assertEqual(result.returncode, 2)
        self.assertIn("outside", result.stderr)

    def test_a_file_that_differs_from_the_manifest_is_refused_with_the_fix(self):
        write_bundle(self.bundle, {"libfoo_1.0_amd64.deb": deb([("./usr/include/foo.h", b"x")])})
        with open(self.bundle / "libfoo_1.0_amd64.deb", "ab") as package:
            package.write(b"tampered")
        result = unpack(self.bundle, self.prefix)
        self.assertEqual(result.returncode, 2)
        self.assertIn("libfoo_1.0_amd64.deb", result.stderr)
        self.assertIn("scripts/gpu-bundle.sh", result.stderr)

    def test_another_architecture_is_refused(self):
        other = "arm64" if ARCHITECTURE == "amd64" else "amd64"
        write_bundle(self.bundle, {"libfoo_1.0_amd64.deb": deb([("./usr/include/foo.h", b"x")])}, architecture=other)
        result = unpack(self.bundle, self.prefix)
        self.assertEqual(result.returncode, 2)
        self.assertIn(f"architecture {other}", result.stderr)

    def test_a_glibc_newer_than_this_machines_is_refused(self):
        write_bundle(self.bundle, {"libfoo_1.0_amd64.deb": deb([("./usr/include/foo.h", b"x")])}, glibc="99.0")
        result = unpack(self.bundle, self.prefix)
        self.assertEqual(result.returncode, 2)
        self.assertIn("glibc >= 99.0", result.stderr)

    def test_a_prefix_holding_the_same_bundle_is_left_alone(self):
        write_bundle(self.bundle, {"libfoo_1.0_amd64.deb": deb([("./usr/include/foo.h", b"x")])})
        self.assertEqual(unpack(self.bundle, self.prefix).returncode, 0)
        (self.prefix / "usr/include/foo.h").write_bytes(b"kept")
        result = unpack(self.bundle, self.prefix)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("already holds", result.stdout)
        self.assertEqual((self.prefix / "usr/include/foo.h").read_bytes(), b"kept")


if __name__ == "__main__":
    SCRIPT = sys.argv.pop(1)
    unittest.main()
