"""Inside fresh namespaces made by ``unshare``: build the sandbox root, then run the program.

Run as ``python -I -S _unshare_init.py FD`` by the ``unshare`` backend, as pid 1 of a new
pid namespace, with a private mount namespace (and, when the caller is not root, a
user namespace). FD holds the JSON plan. Standard library only: it runs before any
site-packages are visible.

Steps: mount a tmpfs as the new root; bind the allowed host dirs read-only, hide the
site-packages dirs inside them under empty tmpfs, bind the allowed packages; add /proc,
a few device nodes and a size-limited /tmp holding the run's files; pivot into it;
then fork the program with its rlimits and seccomp filter (the plan's, see seccomp.py)
under an unprivileged uid, and stay pid 1 to
reap orphans until the program exits. When pid 1 exits the kernel kills every
process left in the namespace.
"""

import base64
import ctypes
import json
import os
import resource
import sys

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
SYS_PIVOT_ROOT = 155  # x86_64
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
PR_CAPBSET_DROP = 24
# statvfs flags that a read-only remount must keep (they are locked in user namespaces)
KEEP = MS_NOSUID | MS_NODEV | MS_NOEXEC | 1024 | 2048 | 4096  # + NOATIME, NODIRATIME, RELATIME

libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]


def _b(s):
    return None if s is None else s.encode()


def mount(src, dst, fstype, flags, data=None):
    if libc.mount(_b(src), _b(dst), _b(fstype), flags, _b(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {src} -> {dst}: {os.strerror(err)}")


def bind_ro(src, dst):
    if os.path.isdir(src):
        os.makedirs(dst, mode=0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(dst), mode=0o755, exist_ok=True)
        open(dst, "a").close()
    mount(src, dst, None, MS_BIND | MS_REC)
    keep = os.statvfs(dst).f_flag & KEEP
    mount(None, dst, None, MS_REMOUNT | MS_BIND | MS_RDONLY | keep)


def build_root(plan, root):
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
    for path, target in plan["symlinks"]:
        os.symlink(target, root + path)
    work = root + plan["workdir"]
    os.makedirs(work, mode=0o755, exist_ok=True)
    mount("tmpfs", work, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={plan['tmp_size']}")
    # binds after the work tmpfs, so that an interpreter living under /tmp stays visible
    for src in plan["binds"]:
        bind_ro(src, root + src)
    # site-packages inside the bound dirs: an empty read-only tmpfs over each
    for path in plan["hidden"]:
        mount("tmpfs", root + path, "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, "mode=0555,size=4k")
    for src, dst in plan["packages"]:
        bind_ro(src, root + dst)
    os.makedirs(root + "/dev", mode=0o755)
    for name in plan["devices"]:
        open(f"{root}/dev/{name}", "w").close()
        mount(f"/dev/{name}", f"{root}/dev/{name}", None, MS_BIND)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{root}/dev/{name}")
    os.makedirs(root + "/proc", mode=0o755)
    mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for name, data in plan["files"].items():
        path = os.path.join(work, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        if plan["uid"] is not None:
            os.chown(path, plan["uid"], plan["gid"])
    if plan["uid"] is not None:
        for dirpath, dirs, _files in os.walk(work):
            # an interpreter dir that lives under /tmp is bound read-only inside the work
            # dir: leave the binds alone
            dirs[:] = [d for d in dirs if not os.path.ismount(os.path.join(dirpath, d))]
            os.chown(dirpath, plan["uid"], plan["gid"])


def pivot(root):
    os.chdir(root)
    if libc.syscall(SYS_PIVOT_ROOT, b".", b".") != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"pivot_root: {os.strerror(err)}")
    if libc.umount2(b".", MNT_DETACH) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"umount old root: {os.strerror(err)}")
    os.chdir("/")
    mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install_filter(program):
    """Install a seccomp filter (a ``struct sock_filter`` array); needs no_new_privs already set."""
    buf = ctypes.create_string_buffer(program, len(program))
    fprog = SockFprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp filter: {os.strerror(err)}")


def exec_program(plan):
    for name, value in plan["rlimits"].items():
        resource.setrlimit(getattr(resource, name), tuple(value))
    for cap in range(64):  # empty the bounding set while we still hold CAP_SETPCAP
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    if plan["uid"] is not None:
        os.setgroups([])
        os.setresgid(plan["gid"], plan["gid"], plan["gid"])
        os.setresuid(plan["uid"], plan["uid"], plan["uid"])
    # without ambient caps, exec as a non-zero uid leaves the program with none
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    if plan["seccomp"]:  # after no_new_privs: without it an unprivileged process may install none
        install_filter(base64.b64decode(plan["seccomp"]))
    os.chdir(plan["workdir"])
    os.setsid()
    try:
        os.execvpe(plan["argv"][0], plan["argv"], plan["env"])
    except OSError as exc:
        os.write(2, f"sandbox: cannot execute {plan['argv'][0]}: {exc}\n".encode())
        os._exit(127)


def main():
    fd = int(sys.argv[1])
    with os.fdopen(fd, "rb") as f:
        plan = json.loads(f.read())
    # nothing we mount may propagate back to the host
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    root = plan["root"]
    build_root(plan, root)
    pivot(root)
    child = os.fork()
    if child == 0:
        exec_program(plan)
    while True:
        pid, status = os.wait()
        if pid == child:
            if os.WIFSIGNALED(status):
                os._exit(128 + os.WTERMSIG(status))
            os._exit(os.WEXITSTATUS(status))


if __name__ == "__main__":
    try:
        main()
    except OSError as exc:
        os.write(2, f"sandbox setup failed: {exc}\n".encode())
        os._exit(125)
