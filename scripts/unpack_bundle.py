#!/usr/bin/env python3
"""Unpacks the Debian packages of a GPU build bundle into a private prefix.

    scripts/unpack_bundle.py BUNDLE PREFIX

BUNDLE is what scripts/gpu-bundle.sh wrote (manifest.txt and the .deb files).
Each package's files land under PREFIX as they would under / (PREFIX/usr/...),
without documentation, and the links its maintainer script registers with
update-alternatives are made inside PREFIX (libopenblas.so, cblas.h), since no
dpkg runs. Nothing is written outside PREFIX: an archive member or link that
would leave it is refused. Needs only Python: no dpkg, ar or xz (the packages
are read here, data.tar.xz through the lzma module).

Checks first that this machine can run the packages (architecture, glibc) and
that each file is the one the manifest names (size, SHA-256). A prefix already
unpacked from the same manifest is left as it is.

Exit status: 0 unpacked (or already), 2 a bundle this machine cannot use,
with the reason and the fix.
"""
import hashlib
import io
import os
import platform
import shlex
import shutil
import sys
import tarfile
from pathlib import Path

ARCHITECTURES = {"amd64": "x86_64", "arm64": "aarch64"}
# What a build never reads; skipping it keeps the prefix small.
SKIPPED = ("usr/share/doc/", "usr/share/man/", "usr/share/lintian/", "usr/share/bug/", "usr/src/")
MARKER = ".unpacked-manifest"


class BundleError(Exception):
    pass


def read_manifest(bundle):
    """The manifest's settings and its packages as (file, bytes, sha256)."""
    path = bundle / "manifest.txt"
    if not path.is_file():
        raise BundleError(f"{path}: no manifest; write the bundle with scripts/gpu-bundle.sh {bundle}")
    settings, packages = {}, []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line or line.startswith("#"):
            continue
        fields = line.split("\t")
        if fields[0] == "package" and len(fields) == 6:
            packages.append((fields[3], int(fields[4]), fields[5]))
        elif len(fields) == 2:
            settings[fields[0]] = fields[1]
        else:
            raise BundleError(f"{path}:{number}: cannot read '{line}'; "
                              "write the bundle again with scripts/gpu-bundle.sh")
    for key in ("architecture", "glibc"):
        if key not in settings:
            raise BundleError(f"{path}: no '{key}' line; write the bundle again with scripts/gpu-bundle.sh")
    return settings, packages


def version_tuple(text):
    return tuple(int(part) for part in text.split(".") if part.isdigit())


def check_machine(settings, manifest):
    machine = platform.machine()
    wanted = ARCHITECTURES.get(settings["architecture"], settings["architecture"])
    if machine != wanted:
        raise BundleError(f"{manifest}: architecture {settings['architecture']}, but this machine is {machine}; "
                          "write the bundle on a Debian 12 machine of this architecture")
    libc, version = platform.libc_ver()
    if libc != "glibc" or version_tuple(version) < version_tuple(settings["glibc"]):
        raise BundleError(f"{manifest}: the packages need glibc >= {settings['glibc']}, this machine has "
                          f"{libc or 'no glibc'} {version}; "
                          "install the build's libraries from this system's own packages")


def check_file(bundle, name, size, sha256):
    path = bundle / name
    if not path.is_file():
        raise BundleError(f"{path}: missing; write the bundle again with scripts/gpu-bundle.sh {bundle}")
    data = path.read_bytes()
    if len(data) != size or hashlib.sha256(data).hexdigest() != sha256:
        raise BundleError(f"{path}: not the file manifest.txt names (size or SHA-256 differ); "
                          f"write the bundle again with scripts/gpu-bundle.sh {bundle}")
    return data


def ar_members(data, path):
    """The members of a .deb (an ar archive) as {name: bytes}."""
    if not data.startswith(b"!<arch>\n"):
        raise BundleError(f"{path}: not a Debian package (no ar header)")
    members, offset = {}, 8
    while offset + 60 <= len(data):
        header = data[offset:offset + 60]
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        members[name] = data[offset + 60:offset + 60 + size]
        offset += 60 + size + (size & 1)
    return members


def open_tar(members, stem, path):
    for name, blob in members.items():
        if name.startswith(stem + ".tar"):
            if name.endswith(".zst"):
                raise BundleError(f"{path}: {name} is zstd, which Python cannot read; use Debian 12's packages")
            return tarfile.open(fileobj=io.BytesIO(blob))
    raise BundleError(f"{path}: no {stem}.tar member")


def inside(prefix, path):
    """PREFIX/path, refused unless it stays inside PREFIX."""
    target = Path(os.path.normpath(prefix / path.lstrip("/")))
    if target != prefix and prefix not in target.parents:
        raise BundleError(f"{path}: would be written outside {prefix}")
    return target


def link_target(prefix, link, target):
    """A symbolic link's target as a relative path that stays inside PREFIX."""
    if target.startswith("/"):
        target = os.path.relpath(inside(prefix, target), link.parent)
    inside(prefix, str((link.parent / target).relative_to(prefix)))
    return target


def member_path(name):
    """An archive member's path relative to the archive's root ("" for the root)."""
    while name.startswith("./"):
        name = name[2:]
    name = os.path.normpath(name) if name else "."
    return "" if name == "." else name


def extract(tar, prefix, path):
    hard_links = []
    for member in tar.getmembers():
        name = member_path(member.name)
        if not name or any(name.startswith(skip) or name + "/" == skip for skip in SKIPPED):
            continue
        destination = inside(prefix, name)
        if member.isdir():
            destination.mkdir(parents=True, exist_ok=True)
            continue
        destination.parent.mkdir(parents=True, exist_ok=True)
        if destination.is_symlink() or destination.exists():
            destination.unlink()
        if member.issym():
            destination.symlink_to(link_target(prefix, destination, member.linkname))
        elif member.islnk():
            hard_links.append((destination, inside(prefix, member_path(member.linkname))))
        elif member.isfile():
            with tar.extractfile(member) as source, open(destination, "wb") as sink:
                shutil.copyfileobj(source, sink)
            destination.chmod(member.mode & 0o755 | 0o644)
        else:
            raise BundleError(f"{path}: {member.name} is neither a file, a folder nor a link")
    for destination, source in hard_links:
        shutil.copy2(source, destination)


def alternatives(members, path):
    """The (link, target) pairs the package's postinst gives update-alternatives."""
    try:
        control = open_tar(members, "control", path)
        script = control.extractfile("./postinst").read().decode()
    except (KeyError, BundleError):
        return []
    pairs = []
    for command in script.replace("\\\n", " ").splitlines():
        words = shlex.split(command, comments=True)
        if not words or words[0] != "update-alternatives" or "--install" not in words:
            continue
        start = words.index("--install")
        pairs.append((words[start + 1], words[start + 3]))
        pairs += [(words[i + 1], words[i + 3]) for i, word in enumerate(words) if word == "--slave"]
    return pairs


def unpack(bundle, prefix):
    manifest = bundle / "manifest.txt"
    settings, packages = read_manifest(bundle)
    check_machine(settings, manifest)
    marker = prefix / MARKER
    if marker.is_file() and marker.read_bytes() == manifest.read_bytes():
        print(f"unpack_bundle: {prefix} already holds this bundle")
        return
    if prefix.exists():
        shutil.rmtree(prefix)
    prefix.mkdir(parents=True)
    links = []
    for name, size, sha256 in packages:
        path = bundle / name
        members = ar_members(check_file(bundle, name, size, sha256), path)
        with open_tar(members, "data", path) as tar:
            extract(tar, prefix, path)
        links += alternatives(members, path)
    for link, target in links:
        destination = inside(prefix, link)
        if (prefix / target.lstrip("/")).exists() and not destination.exists():
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.symlink_to(link_target(prefix, destination, target))
    shutil.copyfile(manifest, marker)
    print(f"unpack_bundle: {len(packages)} packages from {bundle} unpacked into {prefix}")


def main(argv):
    if len(argv) != 3:
        print("usage: scripts/unpack_bundle.py BUNDLE PREFIX", file=sys.stderr)
        return 2
    try:
        unpack(Path(argv[1]).resolve(), Path(os.path.abspath(argv[2])))
    except BundleError as error:
        print(f"unpack_bundle: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
