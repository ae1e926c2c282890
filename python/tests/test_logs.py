import io
import unittest
from contextlib import redirect_stderr

from readie._logs import LogPrinter, format_log_line
from readie._proto import call_pb2


def line(source, text):
    return call_pb2.LogLine(source=source, text=text)


class LogPrinterTest(unittest.TestCase):
    def test_user_output_as_is_readie_notes_prefixed(self):
        self.assertEqual(format_log_line(line(call_pb2.LOG_SOURCE_STDOUT, "hello")), "hello")
        self.assertEqual(format_log_line(line(call_pb2.LOG_SOURCE_STDERR, "oops")), "oops")
        self.assertEqual(
            format_log_line(line(call_pb2.LOG_SOURCE_SYSTEM, "skipped package numpy")),
            "[readie] skipped package numpy",
        )
        self.assertEqual(format_log_line(line(call_pb2.LOG_SOURCE_UNSPECIFIED, "x")), "x")

    def test_prints_each_line_to_the_stream(self):
        stream = io.StringIO()
        printer = LogPrinter(stream)
        printer(line(call_pb2.LOG_SOURCE_STDOUT, "one"))
        printer(line(call_pb2.LOG_SOURCE_SYSTEM, "two"))
        self.assertEqual(stream.getvalue(), "one\n[readie] two\n")

    def test_defaults_to_the_current_stderr(self):
        printer = LogPrinter()
        captured = io.StringIO()
        with redirect_stderr(captured):
            printer(line(call_pb2.LOG_SOURCE_STDERR, "to stderr"))
        self.assertEqual(captured.getvalue(), "to stderr\n")


if __name__ == "__main__":
    unittest.main()
