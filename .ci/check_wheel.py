"""Checks one built wheel the way a user's pip would meet it (called by .ci/wheels).

usage: check_wheel.py WHEEL PLATFORM

PLATFORM is the platform part of the tag the wheel must carry (``manylinux2014_aarch64``,
``musllinux_1_2_x86_64``, ``win_amd64``...). Checked: the file name and the WHEEL file's tags
(cp310, abi3, PLATFORM), its size, that it holds the extension, the sandbox, the CLI entry point,
the pytest plugin, ``py.typed`` and the stubs, and what the extension links against: for ELF,
its DT_NEEDED libraries and newest glibc symbol version (read with pyelftools, auditwheel's own
ELF reader, so it works for a foreign architecture); for Windows, the DLLs it imports (objdump),
none of which may be a MinGW runtime DLL that a Windows machine does not have. Prints one
summary line; exits non-zero on the first failed check.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

LIMIT = 8 * 1024 * 1024

# Every glibc symbol version newer than manylinux2014's (glibc 2.17) would break the tag; musl
# has no symbol versions, and a musllinux extension must need nothing but musl's libc.
GLIBC_MAX = (2, 17)
# A manylinux extension may link only these (the manylinux policy's list, the ones we can need).
ELF_ALLOWED = {
    "libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0", "libgcc_s.so.1",
    "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1",
}
MUSL_ALLOWED = {"libc.so", "libc.musl-x86_64.so.1", "libc.musl-aarch64.so.1"}
# DLLs every Windows 10+ machine has, and the stable-ABI Python DLL.
PE_ALLOWED = re.compile(
    r"^(python3\.dll|kernel32\.dll|ntdll\.dll|advapi32\.dll|bcrypt\.dll|bcryptprimitives\.dll|"
    r"crypt32\.dll|ws2_32\.dll|userenv\.dll|secur32\.dll|ncrypt\.dll|iphlpapi\.dll|ole32\.dll|"
    r"oleaut32\.dll|shell32\.dll|user32\.dll|msvcrt\.dll|ucrtbase\.dll|synchronization\.dll|"
    r"api-ms-win-[a-z0-9-]+\.dll)$",
    re.IGNORECASE,
)


def fail(message: str) -> None:
    print(f"check_wheel: {message}", file=sys.stderr)
    sys.exit(1)


def initial_exec_tls(elf: Any) -> dict[str, int]:
    """Relocations of the initial-exec TLS model, by type. musl's loader refuses them in a library
    loaded with dlopen ("initial-exec TLS resolves to dynamic definition"); glibc tolerates a few."""
    from elftools.elf.enums import ENUM_RELOC_TYPE_AARCH64, ENUM_RELOC_TYPE_x64
    from elftools.elf.relocation import RelocationSection

    names = {"EM_X86_64": ENUM_RELOC_TYPE_x64, "EM_AARCH64": ENUM_RELOC_TYPE_AARCH64}
    types = {number: name for name, number in names[elf["e_machine"]].items()}
    found: dict[str, int] = {}
    for section in elf.iter_sections():
        if isinstance(section, RelocationSection):
            for relocation in section.iter_relocations():
                name = types.get(relocation["r_info_type"], "")
                if re.search(r"(?<!D)TP(OFF|REL)", name):   # not DTPOFF/DTPREL (dynamic)
                    found[name] = found.get(name, 0) + 1
    return found


def elf_report(data: bytes, musl: bool) -> str:
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile
    from elftools.elf.gnuversions import GNUVerNeedSection

    elf = ELFFile(io.BytesIO(data))
    needed: list[str] = []
    for section in elf.iter_sections():
        if isinstance(section, DynamicSection):
            needed += [t.needed for t in section.iter_tags() if t.entry.d_tag == "DT_NEEDED"]
    glibc: list[tuple[int, ...]] = []
    for section in elf.iter_sections():
        if isinstance(section, GNUVerNeedSection):
            for _, auxiliaries in section.iter_versions():
                for aux in auxiliaries:
                    match = re.fullmatch(r"GLIBC_(\d+(?:\.\d+)*)", aux.name)
                    if match:
                        glibc.append(tuple(int(p) for p in match.group(1).split(".")))
    if musl:
        initial_exec = initial_exec_tls(elf)
        if initial_exec:
            fail(f"initial-exec TLS relocations ({initial_exec}): musl refuses to dlopen the extension")
    allowed = MUSL_ALLOWED if musl else ELF_ALLOWED
    extra = sorted(set(needed) - allowed)
    if extra:
        fail(f"the extension needs libraries outside the policy: {extra}")
    if musl:
        if glibc:
            fail(f"a musl extension asks for glibc symbol versions: {sorted(glibc)}")
        return f"links {', '.join(needed)} (musl; no glibc symbol versions, no initial-exec TLS)"
    if not glibc:
        fail("no glibc symbol version found: not a glibc extension?")
    newest = max(glibc)
    if newest > GLIBC_MAX:
        fail(f"newest glibc symbol is GLIBC_{'.'.join(map(str, newest))}, over manylinux2014's 2.17")
    return f"links {', '.join(needed)}; newest glibc symbol GLIBC_{'.'.join(map(str, newest))}"


def pe_report(data: bytes) -> str:
    with tempfile.NamedTemporaryFile(suffix=".pyd") as pyd:
        pyd.write(data)
        pyd.flush()
        dump = subprocess.run(["objdump", "-p", pyd.name], capture_output=True, text=True,
                              check=True).stdout
    if not re.search(r"file format pei-x86-64", dump):
        fail("the .pyd is not an x86-64 PE file")
    dlls = re.findall(r"DLL Name: (\S+)", dump)
    if "python3.dll" not in [d.lower() for d in dlls]:
        fail(f"the .pyd does not import python3.dll (not abi3?): {dlls}")
    extra = [d for d in dlls if not PE_ALLOWED.match(d)]
    if extra:
        fail(f"the .pyd imports DLLs a Windows machine may not have: {extra}")
    return f"imports {', '.join(sorted({d.lower() for d in dlls}))}"


def main() -> None:
    wheel, platform = Path(sys.argv[1]), sys.argv[2]
    match = re.fullmatch(r"bizmsg-([^-]+)-cp310-abi3-([^-]+)\.whl", wheel.name)
    if not match:
        fail(f"not a cp310-abi3 wheel name: {wheel.name}")
    version, platforms = match.groups()
    if platform not in platforms.split("."):
        fail(f"{wheel.name} is not tagged {platform}")
    size = wheel.stat().st_size
    if size >= LIMIT:
        fail(f"{wheel.name} is {size} bytes, over the 8 MB limit")

    windows = platform.startswith("win")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = f"bizmsg-{version}.dist-info"
        extension = "bizmsg/_native.pyd" if windows else "bizmsg/_native.abi3.so"
        required = [
            extension, "bizmsg/py.typed", "bizmsg/_native.pyi", "bizmsg/testing.py",
            "bizmsg/cli/sandbox.py", "bizmsg/cli/__init__.py", "bizmsg/pytest_plugin.py",
            f"{info}/WHEEL", f"{info}/entry_points.txt", f"{info}/METADATA",
        ]
        missing = [name for name in required if name not in names]
        if missing:
            fail(f"{wheel.name} lacks {missing}")
        stray = sorted(n for n in names if n.endswith((".so", ".pyd", ".dll")) and n != extension)
        if stray:
            fail(f"{wheel.name} holds other native files: {stray}")
        tags = re.findall(r"^Tag: (\S+)$", archive.read(f"{info}/WHEEL").decode(), re.MULTILINE)
        if f"cp310-abi3-{platform}" not in tags:
            fail(f"the WHEEL file's tags {tags} do not include cp310-abi3-{platform}")
        entry_points = archive.read(f"{info}/entry_points.txt").decode()
        if not re.search(r"^bizmsg\s*=\s*bizmsg\.cli:main$", entry_points, re.MULTILINE):
            fail("no `bizmsg = bizmsg.cli:main` console script")
        if not re.search(r"^bizmsg\s*=\s*bizmsg\.pytest_plugin$", entry_points, re.MULTILINE):
            fail("no pytest11 plugin entry point")
        native = archive.read(extension)
    # The sandbox is Rust: its Python class must be compiled into the extension.
    for symbol in (b"SandboxServer", b"PyInit__native"):
        if symbol not in native:
            fail(f"the extension has no {symbol.decode()}")
    if windows:
        linkage = pe_report(native)
    else:
        linkage = elf_report(native, musl=platform.startswith("musllinux"))
    print(f"{wheel.name}: {size} bytes ({size / 1048576:.2f} MiB); tags {', '.join(tags)}; "
          f"{linkage}")


if __name__ == "__main__":
    main()
