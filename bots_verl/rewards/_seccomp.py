"""A small seccomp filter for code sandboxes: deny the system calls that would slip past the resource limits.

RLIMIT_AS bounds a process's address space, but memory the kernel holds for it does not count: memfd files and SysV
shared memory or message queues filled and never mapped, or a tmpfs mounted in a nested user namespace. bubblewrap
installs this filter (``--seccomp FD``) before the harness starts, so the program gets ``EPERM`` for those calls and
for other namespace, keyring, BPF, perf and io_uring calls it has no use for; ``clone3`` returns ``ENOSYS`` so that
libc falls back to ``clone``, whose namespace flags are checked (the approach of Docker's default profile).

The filter is classic BPF over ``struct seccomp_data`` for x86-64 and aarch64; on other architectures
:func:`filter_program` returns ``None`` and the sandbox runs without it (the README says so).
"""

from __future__ import annotations

import errno
import platform
import struct

__all__ = ["filter_program"]

# linux/audit.h
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# Syscall numbers (asm/unistd_64.h for x86-64, asm-generic/unistd.h for aarch64).
_DENIED = {
    "x86_64": {
        "memfd_create": 319,
        "shmget": 29,
        "msgget": 68,
        "semget": 64,
        "unshare": 272,
        "setns": 308,
        "mount": 165,
        "umount2": 166,
        "pivot_root": 155,
        "chroot": 161,
        "keyctl": 250,
        "add_key": 248,
        "request_key": 249,
        "userfaultfd": 323,
        "perf_event_open": 298,
        "bpf": 321,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "mq_open": 240,
    },
    "aarch64": {
        "memfd_create": 279,
        "shmget": 194,
        "msgget": 186,
        "semget": 190,
        "unshare": 97,
        "setns": 268,
        "mount": 40,
        "umount2": 39,
        "pivot_root": 41,
        "chroot": 51,
        "keyctl": 219,
        "add_key": 217,
        "request_key": 218,
        "userfaultfd": 282,
        "perf_event_open": 241,
        "bpf": 280,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "mq_open": 180,
    },
}
_CLONE = {"x86_64": 56, "aarch64": 220}
_CLONE3 = 435
# CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET
_CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
# x86-64 syscalls with this bit set are the x32 ABI, another way in to every call above.
_X32_BIT = 0x40000000

# linux/filter.h, linux/seccomp.h
_LD_W_ABS, _JEQ_K, _JSET_K, _JGE_K, _RET_K = 0x20, 0x15, 0x45, 0x35, 0x06
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (the low 32 bits of args[0] on little-endian)


def filter_program(machine: str | None = None) -> bytes | None:
    """The compiled filter (an array of ``struct sock_filter``) for this machine, or ``None`` if unsupported."""
    machine = machine or platform.machine()
    if machine not in _AUDIT_ARCH:
        return None
    deny, enosys, check_clone = "deny", "enosys", "check_clone"
    # (code, k, jump-if-true label or 0, jump-if-false label or 0); labels resolve to relative offsets below.
    program: list[tuple[int, int, str | int, str | int]] = [
        (_LD_W_ABS, _ARCH, 0, 0),
        (_JEQ_K, _AUDIT_ARCH[machine], 0, deny),  # another ABI (e.g. 32-bit calls on x86-64): deny everything
        (_LD_W_ABS, _NR, 0, 0),
    ]
    if machine == "x86_64":
        program.append((_JGE_K, _X32_BIT, deny, 0))
    program += [(_JEQ_K, nr, deny, 0) for nr in _DENIED[machine].values()]
    program += [(_JEQ_K, _CLONE3, enosys, 0), (_JEQ_K, _CLONE[machine], check_clone, 0), (_RET_K, _ALLOW, 0, 0)]
    labels = {check_clone: len(program)}
    program += [(_LD_W_ABS, _ARG0, 0, 0), (_JSET_K, _CLONE_NAMESPACES, deny, 0), (_RET_K, _ALLOW, 0, 0)]
    labels[deny] = len(program)
    program.append((_RET_K, _ERRNO | errno.EPERM, 0, 0))
    labels[enosys] = len(program)
    program.append((_RET_K, _ERRNO | errno.ENOSYS, 0, 0))

    def offset(position: int, target: str | int) -> int:
        if target == 0:
            return 0
        jump = labels[target] - position - 1
        assert 0 <= jump < 256, "BPF jumps are one byte"
        return jump

    return b"".join(
        struct.pack("=HBBI", code, offset(i, jt), offset(i, jf), k) for i, (code, k, jt, jf) in enumerate(program)
    )
