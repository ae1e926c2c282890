"""The frame codec: round trips, limits, truncation."""

import io
import unittest

from readie_executor import frames


class FramesTest(unittest.TestCase):
    def test_round_trip_of_every_kind(self):
        stream = io.BytesIO(
            frames.encode(frames.PAYLOAD, b"abc")
            + frames.encode(frames.PAYLOAD_END)
            + frames.encode_json(frames.CALL, {"format": "json-call"})
            + frames.encode_log(frames.STDERR, "héllo")
        )
        self.assertEqual(frames.read_frame(stream), (frames.PAYLOAD, b"abc"))
        self.assertEqual(frames.read_frame(stream), (frames.PAYLOAD_END, b""))
        kind, body = frames.read_frame(stream)
        self.assertEqual((kind, frames.decode_json(body)), (frames.CALL, {"format": "json-call"}))
        kind, body = frames.read_frame(stream)
        self.assertEqual((kind, body[0], body[1:].decode()), (frames.LOG, frames.STDERR, "héllo"))
        self.assertIsNone(frames.read_frame(stream))

    def test_length_counts_the_type_byte(self):
        self.assertEqual(frames.encode(frames.RESULT, b"xy")[:5], b"\x00\x00\x00\x03\x08")

    def test_refuses_oversized_frames_both_ways(self):
        with self.assertRaises(frames.ProtocolError):
            frames.encode(frames.PAYLOAD, b"x" * frames.MAX_FRAME_LENGTH)
        header = (frames.MAX_FRAME_LENGTH + 1).to_bytes(4, "big") + bytes([frames.PAYLOAD])
        with self.assertRaises(frames.ProtocolError):
            frames.read_frame(io.BytesIO(header))

    def test_refuses_a_stream_cut_inside_a_frame(self):
        whole = frames.encode(frames.PAYLOAD, b"abcdef")
        for cut in (2, 7):
            with self.assertRaises(frames.ProtocolError):
                frames.read_frame(io.BytesIO(whole[:cut]))

    def test_refuses_control_frames_that_are_not_json(self):
        with self.assertRaises(frames.ProtocolError):
            frames.decode_json(b"{nope")


if __name__ == "__main__":
    unittest.main()
