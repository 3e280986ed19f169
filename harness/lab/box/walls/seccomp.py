"""The one seccomp filter of every lab worker: the kernel's keyrings are denied (add_key,
request_key, keyctl fail with EPERM), everything else is allowed.

Why: keyrings are kept by the kernel per UID, outside every namespace bubblewrap makes, and
outlive the process: every student runs as the same slot UIDs, so a note left in one's user
keyring was read by a later one, even in a later grading, and only root could clear it. No
honest LeNet needs a keyring. (SysV shared memory, message queues and semaphores live in the
worker's own IPC namespace, abstract unix sockets in its own network namespace: both vanish
with it.)

The filter is a classic BPF program written out here (no libseccomp needed), handed to bwrap
as `--seccomp FD`, which installs it just before it starts the worker. A system call of another
ABI (x32, i386 on x86_64) is denied too, so no other numbering reaches the keyrings.

    program() -> bytes | None     the filter (struct sock_filter[]), None on an unknown machine
"""

import platform
import struct

# classic BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h)
LD_W_ABS, JEQ_K, JGE_K, RET_K = 0x20, 0x15, 0x35, 0x06
RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000
EPERM = 1
ARCH_OFFSET, NR_OFFSET = 4, 0  # struct seccomp_data: nr, then arch
X32_BIT = 0x40000000
# (AUDIT_ARCH, the numbers of add_key, request_key, keyctl) per machine
MACHINES = {"x86_64": (0xC000003E, (248, 249, 250)), "aarch64": (0xC00000B7, (217, 218, 219))}


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program() -> bytes | None:
    machine = MACHINES.get(platform.machine())
    if machine is None:
        return None
    arch, denied = machine
    deny = RET_ERRNO | EPERM
    ops = [_op(LD_W_ABS, ARCH_OFFSET), _op(JEQ_K, arch, jt=1), _op(RET_K, deny),  # another ABI: denied
           _op(LD_W_ABS, NR_OFFSET)]
    checks = [(JGE_K, X32_BIT), *((JEQ_K, nr) for nr in denied)] if arch == 0xC000003E else \
        [(JEQ_K, nr) for nr in denied]
    for i, (code, k) in enumerate(checks):
        ops.append(_op(code, k, jt=len(checks) - i))  # jump over the rest and the allow, to the deny
    ops += [_op(RET_K, RET_ALLOW), _op(RET_K, deny)]
    return b"".join(ops)
