"""Puts the current process into its container's sandbox (Linux; run as root, then drops to a user).

Called in the container's first process, which is already pid 1 of a fresh pid namespace (a
template's fork, a cold start, or a CRIU restore: every path comes through `enter`). It joins the
container's memory and pids cgroups; unshares the mount, UTS, IPC, network and cgroup namespaces;
brings up its own loopback; makes the whole base filesystem read-only; mounts a fresh /proc, a
sized tmpfs on /tmp, a private /dev/shm and a private devpts; binds the worker's read-only
directories (wheels, fetched packages, the egress resolv.conf); masks the worker's state
directories and /sys/fs/cgroup; switches to the container's own user with no way back, joins a
new session keyring and loads the seccomp filter. See docs/sandbox.md for what this does and
does not guarantee.

Python 3.11 has no os.unshare or os.mount: ctypes reaches libc's.
"""

import ctypes
import fcntl
import os
import resource
import signal
import socket
import struct

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38

SYS_MOUNT_SETATTR = 442  # the same number on x86_64 and aarch64 (the generic syscall table)
AT_FDCWD = -100
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 0x1

SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1
IFF_LOOPBACK = 0x8
IFF_RUNNING = 0x40

KEYCTL_JOIN_SESSION_KEYRING = 1

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.unshare.argtypes = [ctypes.c_int]
_libc.sethostname.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
_libc.syscall.restype = ctypes.c_long


class SandboxError(Exception):
    """A step of entering the sandbox failed; the message names the step and the OS error."""


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


def _check(result, what):
    if result != 0:
        code = ctypes.get_errno()
        raise SandboxError(f"{what}: {os.strerror(code)} (errno {code})")


def _b(text):
    return None if text is None else os.fsencode(text)


def unshare(flags):
    """unshare(2)."""
    _check(_libc.unshare(flags), f"unshare({flags:#x})")


def mount(source, target, fstype, flags, data=None):
    """mount(2)."""
    _check(
        _libc.mount(_b(source), _b(target), _b(fstype), flags, _b(data)),
        f"mount {source or fstype or ''} on {target}",
    )


def prctl(option, value):
    """prctl(2) with one argument."""
    _check(_libc.prctl(option, value, 0, 0, 0), f"prctl({option})")


def die_with_parent():
    """SIGKILL this process when its parent dies."""
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _unescape(field):
    # mountinfo escapes space, tab, newline and backslash as octal.
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 4 <= len(field) and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def _remount_each_read_only():
    """Fallback for kernels before 5.12: remount every mount read-only, one by one."""
    with open("/proc/self/mountinfo", encoding="utf-8") as info:
        entries = [line.split() for line in info]
    for fields in entries:
        target = _unescape(fields[4])
        options = fields[5].split(",")
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY
        for name, bit in (("nosuid", MS_NOSUID), ("nodev", MS_NODEV), ("noexec", MS_NOEXEC)):
            if name in options:
                flags |= bit
        try:
            mount(None, target, None, flags)
        except SandboxError:
            if os.path.exists(target):
                raise


def make_read_only():
    """Makes every mount of this (private) mount namespace read-only."""
    attr = _MountAttr(attr_set=MOUNT_ATTR_RDONLY)
    result = _libc.syscall(
        SYS_MOUNT_SETATTR,
        ctypes.c_int(AT_FDCWD),
        b"/",
        ctypes.c_uint(AT_RECURSIVE),
        ctypes.byref(attr),
        ctypes.c_size_t(ctypes.sizeof(attr)),
    )
    if result != 0:
        _remount_each_read_only()


def join_cgroup(procs_file):
    """Moves this process into a cgroup by writing to its cgroup.procs ("0" means the writer)."""
    try:
        with open(procs_file, "w", encoding="ascii") as procs:
            procs.write("0")
    except OSError as error:
        raise SandboxError(f"joining the cgroup {procs_file}: {error.strerror}") from None


def _close_other_fds(keep):
    keep = sorted(set(fd for fd in keep if fd > 2))
    low = 3
    for fd in keep:
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 20)


def join_cgroups(spec):
    """Moves this process into every cgroup of the container (memory, and pids on cgroup v1)."""
    files = spec["cgroupProcs"]
    for procs in [files] if isinstance(files, str) else list(files):
        join_cgroup(procs)


def loopback_up():
    """Brings up `lo` in this (new) network namespace, so user code can talk to itself."""
    flags = IFF_UP | IFF_LOOPBACK | IFF_RUNNING
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as control:
        try:
            fcntl.ioctl(control, SIOCSIFFLAGS, struct.pack("16sh22x", b"lo", flags))
        except OSError as error:
            raise SandboxError(f"bringing up the loopback interface: {error.strerror}") from None


def join_new_session_keyring():
    """An anonymous session keyring of this user: nothing of the worker's session keyring stays
    possessed. (The seccomp filter then refuses every keyring call anyway.)"""
    from . import syscall_filter

    if syscall_filter.seccomp is None:
        raise SandboxError(syscall_filter.MISSING)
    number = syscall_filter.seccomp.resolve_syscall(syscall_filter.seccomp.Arch.NATIVE, "keyctl")
    if _libc.syscall(ctypes.c_long(number), ctypes.c_int(KEYCTL_JOIN_SESSION_KEYRING), None) < 0:
        code = ctypes.get_errno()
        raise SandboxError(f"joining a new session keyring: {os.strerror(code)} (errno {code})")


def _open_bind_sources(binds):
    # The sources are opened before /tmp and the masked directories are mounted over, since a
    # source may live under either; the mounts then go through /proc/self/fd.
    return [(os.open(bind["source"], os.O_PATH | os.O_CLOEXEC), bind) for bind in binds]


def _bind_read_only(fd, bind):
    target = bind["target"]
    if not os.path.lexists(target):
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            os.makedirs(target, exist_ok=True)
        else:
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
    mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
    # Only an image's build writes through its bind (into a directory the worker made for it).
    read_only = 0 if bind.get("writable") is True else MS_RDONLY
    mount(None, target, None, MS_REMOUNT | MS_BIND | read_only | MS_NOSUID | MS_NODEV)
    os.close(fd)


def _mask(path):
    if os.path.isdir(path):
        mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=755")


def _private_tmp(spec, uid, gid):
    size = int(spec.get("tmpSize", 64 * 1024 * 1024))
    mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode=1777")
    readie = spec.get("readieDir", "/tmp/.readie")
    os.makedirs(readie, mode=0o755, exist_ok=True)
    os.chown(readie, uid, gid)


def _private_devpts():
    # Its own pty instance: the host's /dev/pts (every other container's terminals) is replaced.
    mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620")
    mount("/dev/pts/ptmx", "/dev/ptmx", None, MS_BIND)


def enter(spec, keep_fds=(), on_network=None):
    """Enters the container's sandbox as `spec` describes (see zygote.py for the spec's fields).

    `on_network` is called once the container has its own network namespace (the worker then
    attaches the user-mode network stack of the egress mode to it).
    """
    enter_namespaces(spec, on_network)
    drop_privileges(spec, keep_fds)


def enter_namespaces(spec, on_network=None):
    """The first half of `enter`, as root: the container's cgroups, namespaces and filesystem.

    An image snapshot's container (image_seed.py) runs only this half in its pid 1, which stays
    root; the process it restores is the one whose privileges were dropped, before the dump.
    """
    hardened = spec.get("hardened", True)
    uid, gid = int(spec["uid"]), int(spec["gid"])
    join_cgroups(spec)
    flags = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC
    if hardened:
        # The cgroup namespace comes after joining the cgroups: its root is the container's own.
        flags |= CLONE_NEWNET | CLONE_NEWCGROUP
    unshare(flags)
    if hardened:
        loopback_up()
        if on_network is not None:
            on_network()
    sources = _open_bind_sources(spec.get("binds", []))
    # Nothing done from here on propagates back to the host's mounts.
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    hostname = os.fsencode(spec["hostname"])[:64]
    _check(_libc.sethostname(hostname, len(hostname)), "sethostname")
    make_read_only()
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    # The kernel's settings are root's to write anyway; read-only here too, should a process of
    # the container ever hold root.
    mount("/proc/sys", "/proc/sys", None, MS_BIND)
    mount(None, "/proc/sys", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _private_tmp(spec, uid, gid)
    shm_size = int(spec.get("shmSize", 64 * 1024 * 1024))
    mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"size={shm_size},mode=1777")
    if hardened:
        _private_devpts()
    for fd, bind in sources:
        _bind_read_only(fd, bind)
    for hidden in spec.get("hide", []):
        _mask(hidden)
    if hardened:
        _mask("/sys/fs/cgroup")
    os.chdir("/tmp")


def drop_privileges(spec, keep_fds=()):
    """The second half of `enter`: the container's own user with no way back, its seccomp filter
    and its clean environment; every fd but `keep_fds` (and 0-2) is closed, stdin is /dev/null."""
    hardened = spec.get("hardened", True)
    uid, gid = int(spec["uid"]), int(spec["gid"])
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _close_other_fds(keep_fds)
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    # Changing credentials clears the parent-death signal: set it again, as the new user.
    die_with_parent()
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    os.umask(0o022)
    if hardened:
        join_new_session_keyring()
        from . import syscall_filter

        try:
            syscall_filter.load()
        except OSError as error:
            raise SandboxError(f"loading the seccomp filter: {error.strerror}") from None
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in spec.get("env", {}).items()})


def listen(path):
    """A listening unix socket at `path` (a stale socket file is replaced)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    return listener
