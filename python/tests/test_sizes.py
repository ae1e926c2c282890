import unittest

from readie._sizes import parse_optional_size, parse_size


class ParseSizeTest(unittest.TestCase):
    def test_binary_and_decimal_units(self):
        self.assertEqual(parse_size("2GiB"), 2 * 1024**3)
        self.assertEqual(parse_size("512MiB"), 512 * 1024**2)
        self.assertEqual(parse_size("64KiB"), 64 * 1024)
        self.assertEqual(parse_size("1TiB"), 1024**4)
        self.assertEqual(parse_size("2GB"), 2 * 1000**3)
        self.assertEqual(parse_size("1.5GiB"), 3 * 512 * 1024**2)
        self.assertEqual(parse_size(" 512 mib "), 512 * 1024**2)

    def test_bytes(self):
        self.assertEqual(parse_size(1_000_000), 1_000_000)
        self.assertEqual(parse_size("4096"), 4096)
        self.assertEqual(parse_size("4096B"), 4096)

    def test_rejects_what_is_not_a_size(self):
        for text in ("", "lots", "2 GiBs", "-1", "1e9", "GiB"):
            with self.subTest(text=text), self.assertRaisesRegex(ValueError, "not a size"):
                parse_size(text, name="memory")

    def test_rejects_zero_negative_and_huge(self):
        for value in (0, -5, "0MiB"):
            with self.subTest(value=value), self.assertRaisesRegex(ValueError, "at least 1 byte"):
                parse_size(value)
        with self.assertRaisesRegex(ValueError, "64 bits"):
            parse_size(2**64)

    def test_rejects_other_types(self):
        for value in (True, 1.5, None, [1]):
            with self.subTest(value=value), self.assertRaises(TypeError):
                parse_size(value)  # type: ignore[arg-type]

    def test_optional(self):
        self.assertIsNone(parse_optional_size(None, name="gpu_memory"))
        self.assertEqual(parse_optional_size("1KiB", name="gpu_memory"), 1024)


if __name__ == "__main__":
    unittest.main()
