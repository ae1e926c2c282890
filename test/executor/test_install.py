"""Installs into a prefix: output relayed, failure reported, prefix activated."""

import os
import sys
import tempfile
import unittest

from readie_executor import install


class InstallTest(unittest.TestCase):
    def test_relays_output_and_reports_a_failure(self):
        lines = []
        done = install.install(
            {"argv": [sys.executable, "-c", "print('working'); import sys; sys.exit(4)"], "prefix": "/nonexistent"},
            lambda source, text: lines.append((source, text)),
        )
        self.assertEqual(lines, [(3, "working")])
        self.assertEqual(done, {"ok": False, "exitCode": 4, "message": f"{sys.executable} exited with code 4"})

    def test_a_missing_installer_is_a_failure_not_a_crash(self):
        done = install.install({"argv": ["/nonexistent/uv"], "prefix": "/tmp"}, lambda *_: None)
        self.assertFalse(done["ok"])
        self.assertIn("could not run /nonexistent/uv", done["message"])

    def test_refuses_malformed_requests(self):
        self.assertFalse(install.install({"argv": "pip", "prefix": "/tmp"}, lambda *_: None)["ok"])
        self.assertFalse(install.install({"argv": ["true"]}, lambda *_: None)["ok"])

    def test_activate_puts_site_dirs_of_the_prefix_first(self):
        with tempfile.TemporaryDirectory() as prefix:
            site = os.path.join(prefix, "local", "lib", "python3.11", "dist-packages")
            os.makedirs(os.path.join(site, "readie_probe_pkg"))
            with open(os.path.join(site, "readie_probe_pkg", "__init__.py"), "w") as module:
                module.write("VALUE = 7\n")
            self.assertEqual(install.site_dirs(prefix), [site])
            saved = list(sys.path)
            try:
                install.activate(prefix)
                self.assertEqual(sys.path[0], site)
                import readie_probe_pkg

                self.assertEqual(readie_probe_pkg.VALUE, 7)
            finally:
                sys.path[:] = saved
                sys.modules.pop("readie_probe_pkg", None)


if __name__ == "__main__":
    unittest.main()
