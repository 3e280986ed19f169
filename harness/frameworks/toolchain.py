"""What a level that compiles at run time needs installed besides Python's distributions: the C
compiler's driver, the programs it runs to build a shared library and the shared libraries each
loads, as the compiler itself says (the bill's system tools; lenet_c.build.toolchain asks here).

    program(command, name) -> path | None         where the driver finds the program `name`
    shared_libraries(path) -> [path]              what the program loads (ldd)
    toolchain_files(command, version) -> dict     {"compiler": version, "files": {real path: bytes}}
"""

import os
import shutil
import subprocess
from collections.abc import Sequence

# the programs gcc's driver runs to build a shared library: compiler proper, assembler, the linker's
# wrapper and the linker (clang's driver is its own compiler and assembler: it answers as and ld)
PROGRAMS = ("cc1", "as", "collect2", "ld")


def program(command: Sequence[str], name: str) -> str | None:
    """Where the program `name` the driver (command: its argv prefix, "ccache gcc" split) runs
    lies, as the driver finds it: `-print-prog-name` answers a path from its own folders
    (/usr/lib/gcc/x86_64-linux-gnu/12/cc1), else the bare name, which it runs from PATH (as, ld);
    None where neither holds (clang has no cc1 of its own)."""
    try:
        done = subprocess.run([*command, f"-print-prog-name={name}"], capture_output=True, text=True,
                              timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    answer = done.stdout.strip()
    if done.returncode != 0 or not answer:
        return None
    return answer if os.path.isabs(answer) and os.path.isfile(answer) else shutil.which(answer)


def shared_libraries(path: str) -> list[str]:
    """The shared libraries the program at `path` loads, as the dynamic loader resolves them (ldd:
    `libisl.so.23 => /lib/x86_64-linux-gnu/libisl.so.23 (0x...)`, the loader itself by its path);
    [] where ldd is missing or refuses (a static program)."""
    try:
        done = subprocess.run(["ldd", path], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    found = []
    for line in done.stdout.splitlines():
        target = line.split("=>", 1)[1] if "=>" in line else line
        words = target.split()
        if words and words[0].startswith("/"):
            found.append(words[0])
    return found


def toolchain_files(command: Sequence[str], version: str) -> dict:
    """{"compiler": its `--version` line, "files": {real path: bytes on disk}}: the driver (command's
    words found on PATH: a wrapper such as ccache and the compiler it runs), the programs it runs to
    build the library (PROGRAMS) and the shared libraries each loads. Not counted: the headers and
    the C library's link files (libc6-dev, a few MB), nor a linker plugin loaded at run time
    (liblto_plugin, unused without -flto)."""
    paths = [p for word in command if (p := shutil.which(word))]
    paths += [p for name in PROGRAMS if (p := program(command, name))]
    found: dict[str, int] = {}
    for found_path in [*paths, *(lib for program_path in paths for lib in shared_libraries(program_path))]:
        real = os.path.realpath(found_path)
        if real not in found:
            try:
                found[real] = os.stat(real).st_size
            except OSError:
                continue
    return {"compiler": version, "files": found}
