"""The seccomp filter every sandboxed process runs under: the kernel's keyrings are refused.

Keyrings are the one kernel store that outlives a sandbox's namespaces: a key added under a
uid of the host's user namespace lands in that uid's user (or persistent, 3 days) keyring,
which the next process of the uid can read, and the kernel keeps a record per uid in
``/proc/key-users`` for good once a keyring was made, even by ``KEYCTL_CLEAR``. Runs under
a fresh uid each would grow that without bound, runs of one warm zygote would share it.
So ``add_key``, ``request_key`` and ``keyctl`` fail with ``EPERM`` (nothing a program needs
them for here); any other syscall passes. Calls of another ABI (i386 ``int 0x80``, x32)
kill the process: they would reach the keyring syscalls under other numbers.

The program is classic BPF, hand-assembled, as the kernel's ``struct sock_filter`` array
(``u16 code, u8 jt, u8 jf, u32 k``, native byte order): what ``bwrap --seccomp FD`` reads,
and what ``_unshare_init.py`` installs with ``prctl(PR_SET_SECCOMP)``.
"""

from __future__ import annotations

import errno
import functools
import os
import struct

#: per machine: the seccomp audit arch, and the numbers of add_key, request_key and keyctl
KEY_SYSCALLS = {"x86_64": (0xC000003E, (248, 249, 250)), "aarch64": (0xC00000B7, (217, 218, 219))}
_X32_BIT = 0x40000000

# the few classic BPF opcodes used (linux/filter.h, linux/seccomp.h)
_LOAD = 0x20  # BPF_LD | BPF_W | BPF_ABS: A = the seccomp_data word at offset k
_JEQ, _JGE = 0x15, 0x35  # BPF_JMP | BPF_JEQ/BPF_JGE | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_NR, _ARCH = 0, 4  # offsets of the syscall number and the audit arch in struct seccomp_data
_ALLOW, _KILL, _ERRNO = 0x7FFF0000, 0x80000000, 0x00050000  # SECCOMP_RET_ALLOW, _KILL_PROCESS, _ERRNO


@functools.cache
def keyring_filter() -> bytes | None:
    """The filter program for this machine, or ``None`` where its syscall numbers are not known here."""
    known = KEY_SYSCALLS.get(os.uname().machine)
    if known is None:
        return None
    arch, numbers = known
    program = [(_LOAD, 0, 0, _ARCH), (_JEQ, 1, 0, arch), (_RET, 0, 0, _KILL), (_LOAD, 0, 0, _NR)]
    if arch == KEY_SYSCALLS["x86_64"][0]:
        program += [(_JGE, 0, 1, _X32_BIT), (_RET, 0, 0, _KILL)]
    # each number jumps over the ones after it and the ALLOW to the ERRNO at the end
    program += [(_JEQ, len(numbers) - i, 0, number) for i, number in enumerate(numbers)]
    program += [(_RET, 0, 0, _ALLOW), (_RET, 0, 0, _ERRNO | errno.EPERM)]
    return b"".join(struct.pack("=HBBI", *line) for line in program)


def filter_fd() -> int | None:
    """A memfd holding :func:`keyring_filter` at offset 0 (the caller closes it), or ``None``."""
    program = keyring_filter()
    if program is None:
        return None
    fd = os.memfd_create("gem-seccomp", 0)
    os.write(fd, program)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
