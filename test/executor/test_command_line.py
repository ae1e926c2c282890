"""What ps shows for a restored container: the live worker's pid, never the dumped seed's."""

import subprocess
import sys
import unittest

from readie_executor import command_line

SEED = [
    "/usr/bin/python3", "-s", "-E", "-B", "-m", "readie_executor",
    "--worker-pid", "12325", "--checkpoint", "ckpt-numpy", "--modules", "numpy",
    "--setup", "/state/checkpoints/.building-1/setup.py",
    "--criu", "/usr/local/lib/readie/criu/sbin/criu",
    "--criu-seed", "/state/checkpoints/.building-1",
]  # fmt: skip


class RestoredCommandLineTest(unittest.TestCase):
    def test_names_the_live_worker_and_the_images_and_drops_what_only_the_build_used(self):
        self.assertEqual(
            command_line.restored_command_line(SEED, 4194301, "/state/checkpoints/ckpt-numpy"),
            ["/usr/bin/python3", "-s", "-E", "-B", "-m", "readie_executor",
             "--worker-pid", "4194301", "--checkpoint", "ckpt-numpy", "--modules", "numpy",
             "--restored-from", "/state/checkpoints/ckpt-numpy"],
        )  # fmt: skip

    def test_an_empty_modules_value_stays_a_word(self):
        argv = SEED[:10] + ["--modules", ""] + SEED[-2:]
        shown = command_line.restored_command_line(argv, 7, "/i")
        self.assertEqual(shown[-4:], ["--modules", "", "--restored-from", "/i"])

    def test_the_process_command_line_reads_the_new_words_cut_to_its_area(self):
        # A real process whose argv holds a pid of 9 digits: rewritten with a shorter one, then
        # with words longer than the area, which are cut (nothing is written past it).
        script = (
            "import sys\n"
            "from readie_executor import command_line\n"
            "def read():\n"
            "    return open('/proc/self/cmdline', 'rb').read()\n"
            "size = len(read())\n"
            "command_line.show_restored(42, '/images')\n"
            "print(read().rstrip(b'\\0').split(b'\\0')[3:])\n"
            "command_line.show(['x' * (size * 2)])\n"
            "after = read()\n"
            "print(len(after) == size, after.rstrip(b'\\0') == b'x' * (size - 1))\n"
        )
        run = subprocess.run(
            [sys.executable, "-c", script, "--worker-pid", "123456789", "--checkpoint", "c0",
             "--modules", "", "--criu", "/usr/sbin/criu", "--criu-seed", "/building"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        first, second = run.stdout.splitlines()
        self.assertEqual(
            first,
            str([b"--worker-pid", b"42", b"--checkpoint", b"c0", b"--modules", b"", b"--restored-from", b"/images"]),
        )  # fmt: skip
        self.assertEqual(second, "True True")


if __name__ == "__main__":
    unittest.main()
