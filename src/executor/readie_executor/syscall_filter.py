"""The container's seccomp filter, built with libseccomp's Python bindings (python3-seccomp).

Everything is allowed but the system calls that reach beyond the container: new user namespaces
(the unprivileged way back to capabilities), keyrings, kernel modules, mounts, ptrace and reading
or writing other processes' memory, namespaces, kexec, BPF, perf events, userfaultfd, io_uring,
file handles, the clock, swap, quotas, and vsock sockets (not scoped by the network namespace:
they reach the hypervisor's host). Each is refused with EPERM; clone3 answers ENOSYS (its flags
live in memory a filter cannot read), so libc falls back to clone, whose flags it can.

libseccomp resolves names per architecture and refuses other ABIs (i386 and x32 calls on
x86_64 kill the process): hand-written BPF would have to get all of that right itself. The
filter is built once in each template (and cold zygote) by `prepare`, and only loaded (about
0.1 ms) in each container by `load`, the last step of entering the sandbox.
"""

import errno

try:
    import seccomp
except ImportError:  # reported by load(), when a container needs the filter
    seccomp = None

CLONE_NEWUSER = 0x10000000
AF_VSOCK = 40

REFUSED = (
    "keyctl",
    "add_key",
    "request_key",
    "init_module",
    "finit_module",
    "delete_module",
    "create_module",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "syslog",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "mount_setattr",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "move_mount",
    "open_tree",
    "unshare",
    "setns",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "open_by_handle_at",
    "name_to_handle_at",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "iopl",
    "ioperm",
    "lookup_dcookie",
    "quotactl",
    "quotactl_fd",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "uselib",
    "nfsservctl",
    "vm86",
    "vm86old",
)

MISSING = (
    "the seccomp filter needs libseccomp's Python bindings, which this interpreter cannot import:"
    " apt-get install python3-seccomp (or point --python at an interpreter that has them)"
)

_prepared = None


def _build():
    refused = seccomp.ERRNO(errno.EPERM)
    rules = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    for name in REFUSED:
        try:
            rules.add_rule(refused, name)
        except RuntimeError:
            pass  # not a system call of this architecture
    rules.add_rule(refused, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER))
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    rules.add_rule(refused, "socket", seccomp.Arg(0, seccomp.EQ, AF_VSOCK))
    return rules


def prepare():
    """Builds the filter ahead of the containers that will load it (their forks share it)."""
    global _prepared
    if seccomp is not None and _prepared is None:
        _prepared = _build()


def load():
    """Applies the filter to this process and everything it starts; needs no_new_privs set."""
    if seccomp is None:
        raise OSError(errno.ENOPKG, MISSING)
    prepare()
    _prepared.load()
