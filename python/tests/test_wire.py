import platform
import unittest

from readie._ids import CallInfo, new_request_id, new_session_id
from readie._proto import call_pb2, proxy_pb2
from readie._wire import CHUNK_SIZE, AnswerReader, CallDemand, build_config, iter_chunks, request_messages
from readie.errors import ProtocolError

MiB = 1024 * 1024


class ChunkingTest(unittest.TestCase):
    def sizes(self, length):
        return [len(piece) for piece in iter_chunks(bytes(length))]

    def test_chunk_size_is_one_mebibyte(self):
        self.assertEqual(CHUNK_SIZE, 1_048_576)

    def test_boundaries(self):
        self.assertEqual(self.sizes(0), [])
        self.assertEqual(self.sizes(1), [1])
        self.assertEqual(self.sizes(MiB - 1), [MiB - 1])
        self.assertEqual(self.sizes(MiB), [MiB])
        self.assertEqual(self.sizes(MiB + 1), [MiB, 1])
        self.assertEqual(self.sizes(2 * MiB), [MiB, MiB])

    def test_64_mebibytes(self):
        payload = bytes(range(256)) * (64 * MiB // 256)
        pieces = list(iter_chunks(payload))
        self.assertEqual(len(pieces), 64)
        self.assertTrue(all(len(piece) == MiB for piece in pieces))
        self.assertEqual(b"".join(pieces), payload)

    def test_pieces_keep_order_and_content(self):
        payload = bytes(range(256)) * 10_000 + b"tail"
        self.assertEqual(b"".join(iter_chunks(payload, 1000)), payload)

    def test_positive_chunk_size(self):
        with self.assertRaises(ValueError):
            list(iter_chunks(b"x", 0))


class RequestMessagesTest(unittest.TestCase):
    def test_config_alone_first_then_chunks(self):
        config = proxy_pb2.CallConfig(request_id="req-1")
        messages = list(request_messages(config, bytes(MiB + 1)))
        self.assertEqual([m.WhichOneof("message") for m in messages], ["config", "chunk", "chunk"])
        self.assertEqual(messages[0].config.request_id, "req-1")
        self.assertFalse(messages[0].HasField("chunk"))
        self.assertEqual([len(m.chunk.data) for m in messages[1:]], [MiB, 1])
        for message in messages:
            self.assertLessEqual(message.ByteSize(), MiB + 16)

    def test_empty_payload_sends_the_config_only(self):
        messages = list(request_messages(proxy_pb2.CallConfig(request_id="req-1"), b""))
        self.assertEqual([m.WhichOneof("message") for m in messages], ["config"])


class BuildConfigTest(unittest.TestCase):
    def test_everything_travels(self):
        demand = CallDemand(
            memory=2 * 1024**3,
            gpu=True,
            gpu_memory=1024**3,
            checkpoint_id="ckpt-numpy",
            disable_optimized_execution=True,
            packages=("tqdm", "requests>=2"),
        )
        config = build_config("req-1", demand, ["numpy", "torch"], session_id="ses-1")
        self.assertEqual(config.request_id, "req-1")
        self.assertEqual(config.session_id, "ses-1")
        self.assertEqual(list(config.imports), ["numpy", "torch"])
        self.assertEqual(config.memory, 2 * 1024**3)
        self.assertEqual(config.gpu_memory, 1024**3)
        self.assertTrue(config.gpu)
        self.assertTrue(config.disable_optimized_execution)
        self.assertEqual(list(config.packages), ["tqdm", "requests>=2"])
        self.assertEqual(config.checkpoint_id, "ckpt-numpy")
        self.assertEqual(config.python_version, platform.python_version())
        self.assertEqual(config.format, call_pb2.PAYLOAD_FORMAT_CLOUDPICKLE)

    def test_unset_budgets_are_absent_not_zero(self):
        config = build_config("req-1", CallDemand(), [])
        self.assertFalse(config.HasField("memory"))
        self.assertFalse(config.HasField("gpu_memory"))
        self.assertEqual(config.session_id, "")
        self.assertFalse(config.gpu)
        # Absent optional fields stay absent on the wire, too.
        decoded = proxy_pb2.CallConfig.FromString(config.SerializeToString())
        self.assertFalse(decoded.HasField("memory"))

    def test_python_version_can_be_given(self):
        self.assertEqual(build_config("r", CallDemand(), [], python_version="3.12.1").python_version, "3.12.1")


class IdsTest(unittest.TestCase):
    def test_request_and_session_ids(self):
        request_id = new_request_id()
        self.assertRegex(request_id, r"^req-[0-9a-f]{32}$")
        self.assertNotEqual(request_id, new_request_id())
        self.assertRegex(new_session_id(), r"^ses-[0-9a-f]{32}$")

    def test_worker_answers_are_authoritative_for_the_checkpoint(self):
        info = CallInfo("req-1", "ses-1")
        planned = info.updated(call_pb2.CallIds(request_id="req-1", worker_id="w1", checkpoint_id="ckpt-a"))
        self.assertEqual((planned.worker_id, planned.checkpoint_id), ("w1", "ckpt-a"))
        cold = planned.updated(call_pb2.CallIds(request_id="req-1", worker_id="w1", container_id="c1"))
        self.assertEqual((cold.container_id, cold.checkpoint_id), ("c1", ""))
        self.assertEqual(cold.session_id, "ses-1")
        unchanged = cold.updated(call_pb2.CallIds(request_id="req-1"))
        self.assertIs(unchanged, cold)


class AnswerReaderTest(unittest.TestCase):
    def answer(self, **fields):
        return proxy_pb2.RequestExecutionResponse(
            ids=call_pb2.CallIds(request_id="req-1", worker_id="w1", container_id="c1", checkpoint_id="k1"), **fields
        )

    def test_chunks_join_logs_go_to_the_sink_ids_are_kept(self):
        lines = []
        reader = AnswerReader(CallInfo("req-1"), lines.append)
        reader.feed(self.answer(log=call_pb2.LogLine(source=call_pb2.LOG_SOURCE_STDOUT, text="hi")))
        reader.feed(self.answer(chunk=call_pb2.PayloadChunk(data=b"ab")))
        reader.feed(self.answer(chunk=call_pb2.PayloadChunk(data=b"cd")))
        self.assertEqual(reader.payload(), b"abcd")
        self.assertEqual([line.text for line in lines], ["hi"])
        self.assertEqual(reader.info, CallInfo("req-1", "", "w1", "c1", "k1"))

    def test_no_result_is_a_protocol_error(self):
        reader = AnswerReader(CallInfo("req-1"))
        reader.feed(self.answer(log=call_pb2.LogLine(text="only a log")))
        with self.assertRaisesRegex(ProtocolError, "without a result") as caught:
            reader.payload()
        self.assertEqual(caught.exception.call.worker_id, "w1")

    def test_an_empty_result_chunk_is_a_result(self):
        reader = AnswerReader(CallInfo("req-1"))
        reader.feed(self.answer(chunk=call_pb2.PayloadChunk(data=b"")))
        self.assertEqual(reader.payload(), b"")


if __name__ == "__main__":
    unittest.main()
