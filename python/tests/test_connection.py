import os
import tempfile
import unittest

import readie
from readie._connection import ConnectionSettings, channel_for, current_settings


class SettingsTest(unittest.TestCase):
    def tearDown(self):
        readie.configure()

    def test_from_the_environment(self):
        settings = current_settings(
            {"READIE_ADDRESS": "router:443", "READIE_CA_FILE": "/ca.pem", "READIE_AUTH_TOKEN": "s3cret"}
        )
        self.assertEqual(settings, ConnectionSettings("router:443", False, "/ca.pem", "s3cret"))
        self.assertEqual(settings.metadata(), (("authorization", "Bearer s3cret"),))

    def test_tls_by_default_insecure_on_request(self):
        self.assertFalse(current_settings({"READIE_ADDRESS": "a:1"}).insecure)
        for flag, insecure in (("1", True), ("true", True), ("0", False), ("", False)):
            with self.subTest(flag=flag):
                self.assertEqual(current_settings({"READIE_ADDRESS": "a:1", "READIE_INSECURE": flag}).insecure, insecure)
        with self.assertRaisesRegex(readie.ConfigurationError, "READIE_INSECURE"):
            current_settings({"READIE_ADDRESS": "a:1", "READIE_INSECURE": "maybe"})

    def test_no_token_no_metadata(self):
        self.assertEqual(current_settings({"READIE_ADDRESS": "a:1"}).metadata(), ())

    def test_an_address_is_required(self):
        with self.assertRaisesRegex(readie.ConfigurationError, "READIE_ADDRESS"):
            current_settings({})

    def test_configure_wins_over_the_environment(self):
        readie.configure("other:2", insecure=True, token="t")
        settings = current_settings({"READIE_ADDRESS": "a:1", "READIE_INSECURE": "0", "READIE_AUTH_TOKEN": "env"})
        self.assertEqual(settings, ConnectionSettings("other:2", True, None, "t"))
        readie.configure()
        self.assertEqual(current_settings({"READIE_ADDRESS": "a:1"}).address, "a:1")

    def test_an_unreadable_ca_file_is_a_clear_error(self):
        with tempfile.TemporaryDirectory() as directory:
            missing = os.path.join(directory, "missing.pem")
            with self.assertRaisesRegex(readie.ConfigurationError, "missing.pem"):
                channel_for(ConnectionSettings("a:1", False, missing))

    def test_channels_are_shared_per_settings(self):
        settings = ConnectionSettings("127.0.0.1:1", True)
        self.assertIs(channel_for(settings), channel_for(settings))
        readie.close_channels()


if __name__ == "__main__":
    unittest.main()
