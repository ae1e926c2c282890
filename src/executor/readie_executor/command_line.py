"""What `ps` shows for a container restored from a CRIU image.

A restored process keeps the command line of the seed that was dumped, often by an earlier run of
the worker: `--worker-pid` named that run's worker and `--criu-seed` the directory the image was
built in. After a restore the container rewrites it in place (the memory between the kernel's
`arg_start` and `arg_end`, which /proc/PID/cmdline reads): the live worker's pid, its checkpoint and
modules, and `--restored-from` the images it came from. The build-only flags (`--criu`, `--setup`)
go, which also leaves room for a longer pid; what still does not fit is cut, never written past
the area.
"""

import ctypes

# The flags of a seed's command line that say nothing about a restored container.
_DROPPED = ("--criu", "--setup")


def restored_command_line(argv, worker_pid, images):
    """The words a container restored from `images` for the worker `worker_pid` shows, from the
    seed's `argv` (the interpreter and its options first, then the executor's flags)."""
    words = list(argv)
    try:
        first_flag = words.index("--worker-pid")
    except ValueError:
        first_flag = next((i for i, word in enumerate(words) if word.startswith("--")), len(words))
    shown = words[:first_flag] + ["--worker-pid", str(worker_pid)]
    flags = words[first_flag:]
    i = 0
    while i < len(flags):
        flag = flags[i]
        value = flags[i + 1] if i + 1 < len(flags) else None
        i += 2
        if flag == "--worker-pid" or flag in _DROPPED:
            continue
        if flag == "--criu-seed":
            shown += ["--restored-from", images or (value or "")]
        elif value is not None:
            shown += [flag, value]
        else:
            shown.append(flag)
    return shown


def _arg_area():
    """[arg_start, arg_end) of this process (fields 48 and 49 of /proc/self/stat)."""
    with open("/proc/self/stat", "rb") as stat:
        text = stat.read()
    # The name (field 2) may hold spaces and parentheses: count from the last ")"; field 3 follows.
    fields = text[text.rindex(b")") + 2 :].split()
    return int(fields[48 - 3]), int(fields[49 - 3])


def show(words):
    """Makes /proc/self/cmdline (what `ps` shows) read `words`, cut to the area the kernel gave
    the process's arguments. False when it could not (no such area)."""
    start, end = _arg_area()
    size = end - start
    if start == 0 or size <= 1:
        return False
    text = b"\0".join(word.encode("utf-8", "surrogateescape") for word in words)[: size - 1]
    # NUL-padded to the end: the kernel shows the area as it is when its last byte is NUL.
    ctypes.memmove(start, text + b"\0" * (size - len(text)), size)
    return True


def show_restored(worker_pid, images):
    """Rewrites a restored container's command line (best effort: a failure changes nothing)."""
    try:
        with open("/proc/self/cmdline", "rb") as cmdline:
            raw = cmdline.read()
        # Empty words are arguments too (`--modules ""`); only the final NUL ends no word.
        words = raw[:-1].split(b"\0") if raw.endswith(b"\0") else raw.split(b"\0")
        argv = [word.decode("utf-8", "surrogateescape") for word in words]
        show(restored_command_line(argv, worker_pid, images))
    except (OSError, ValueError):
        pass
