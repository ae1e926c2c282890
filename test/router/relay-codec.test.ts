import { expect } from 'chai';
import { BinaryWriter } from '@bufbuild/protobuf/wire';
import { LogSource, PayloadFormat } from '../../src/proto/gen/readie/v1/call.js';
import { ExecuteRequest, ExecuteResponse } from '../../src/proto/gen/readie/v1/execution.js';
import {
  RequestExecutionRequest,
  RequestExecutionResponse,
} from '../../src/proto/gen/readie/v1/proxy.js';
import {
  decodeClientMessage,
  decodeWorkerAnswer,
  clientAnswerParts,
  encodeClientAnswer,
  encodeWorkerMessage,
} from '../../src/router/calls/relay-codec.js';
import { callConfig } from '../support/router/harness.js';
import { framedParts } from '../../src/router/wire/grpc-frames.js';

const ids = {
  requestId: 'r1',
  sessionId: 's1',
  workerId: 'w1',
  containerId: 'c1',
  checkpointId: 'ckpt',
  version: '',
  routingRevision: 0,
};

function clientWire(message: RequestExecutionRequest): Buffer {
  return Buffer.from(RequestExecutionRequest.encode(message).finish());
}

function workerWire(message: ExecuteResponse): Buffer {
  return Buffer.from(ExecuteResponse.encode(message).finish());
}

describe('router relay codec: chunks and answers pass through as wire bytes', () => {
  it('reads a config with the generated decoder', () => {
    const config = callConfig({
      requestId: 'r1',
      format: PayloadFormat.PAYLOAD_FORMAT_CLOUDPICKLE,
    });
    const message = decodeClientMessage(
      clientWire({ message: { $case: 'config', value: config } }),
    );
    // A plain call: the batch and image fields are absent on the wire, undefined once read.
    expect(message).to.deep.equal({
      kind: 'config',
      config: { ...config, inputs: undefined, maxInputs: undefined, image: undefined },
    });
  });

  it("forwards a client's chunk bytes unchanged, and they read as the worker's chunk", () => {
    const data = Buffer.from('payload bytes');
    const wire = clientWire({ message: { $case: 'chunk', value: { data } } });
    const message = decodeClientMessage(wire);
    expect(message).to.include({ kind: 'chunk', bytes: data.length });
    if (message.kind !== 'chunk') throw new Error('not a chunk');
    const toWorker = encodeWorkerMessage({ kind: 'chunk', wire: message.wire });
    expect(toWorker).to.equal(wire);
    expect(ExecuteRequest.decode(toWorker)).to.deep.equal({
      message: { $case: 'chunk', value: { data } },
    });
  });

  it('counts an empty chunk as 0 bytes and a message with nothing as empty', () => {
    expect(
      decodeClientMessage(
        clientWire({ message: { $case: 'chunk', value: { data: Buffer.alloc(0) } } }),
      ),
    ).to.include({ kind: 'chunk', bytes: 0 });
    expect(decodeClientMessage(Buffer.alloc(0))).to.deep.equal({ kind: 'empty' });
  });

  it('keeps protobuf semantics when a message holds both members: the last one wins', () => {
    const config = clientWire({ message: { $case: 'config', value: callConfig() } });
    const chunk = clientWire({ message: { $case: 'chunk', value: { data: Buffer.from('x') } } });
    const configLast = decodeClientMessage(Buffer.concat([chunk, config]));
    expect(configLast.kind).to.equal('config');
    const chunkLast = decodeClientMessage(Buffer.concat([config, chunk]));
    expect(chunkLast).to.include({ kind: 'chunk', bytes: 1 });
    if (chunkLast.kind !== 'chunk') throw new Error('not a chunk');
    expect(ExecuteRequest.decode(chunkLast.wire).message).to.deep.equal({
      $case: 'chunk',
      value: { data: Buffer.from('x') },
    });
  });

  it('reads the IDs of a worker answer and relays it untouched when the IDs agree', () => {
    const data = Buffer.from('result');
    const wire = workerWire({ ids, message: { $case: 'chunk', value: { data } } });
    const answer = decodeWorkerAnswer(wire);
    expect(answer).to.include({ carries: 'chunk', chunkBytes: data.length });
    expect(answer.ids).to.deep.equal(ids);
    const toClient = encodeClientAnswer({ kind: 'relayed', ids, answer });
    expect(toClient).to.equal(wire);
    expect(RequestExecutionResponse.decode(toClient)).to.deep.equal({
      ids,
      message: { $case: 'chunk', value: { data } },
    });
  });

  it("rewrites the IDs when the router's differ, keeping what the answer carries", () => {
    const line = { source: LogSource.LOG_SOURCE_STDOUT, text: 'hello' };
    const wire = workerWire({
      ids: { ...ids, sessionId: '' },
      message: { $case: 'log', value: line },
    });
    const answer = decodeWorkerAnswer(wire);
    expect(answer.carries).to.equal('log');
    const toClient = encodeClientAnswer({ kind: 'relayed', ids, answer });
    expect(RequestExecutionResponse.decode(toClient)).to.deep.equal({
      ids,
      // A line of no batch input: `input` is absent, undefined once read.
      message: { $case: 'log', value: { ...line, input: undefined } },
    });
  });

  it('writes a large chunk after rewritten IDs as the bytes it came in (not copied), framed as one message', () => {
    const data = Buffer.alloc(256 * 1024, 7);
    const wire = workerWire({ message: { $case: 'chunk', value: { data } } });
    const answer = decodeWorkerAnswer(wire);
    const parts = clientAnswerParts({ kind: 'relayed', ids, answer });
    expect(parts).to.have.length(2);
    expect(parts[1]!.buffer, 'the body is a view of the bytes received').to.equal(wire.buffer);
    const pieces = framedParts(parts);
    const frame = Buffer.concat(pieces);
    expect(frame.readUInt32BE(1)).to.equal(frame.length - 5);
    expect(RequestExecutionResponse.decode(frame.subarray(5))).to.deep.equal({
      ids,
      message: { $case: 'chunk', value: { data } },
    });
    const small = decodeWorkerAnswer(
      workerWire({ message: { $case: 'chunk', value: { data: Buffer.from('ab') } } }),
    );
    expect(
      clientAnswerParts({ kind: 'relayed', ids, answer: small }),
      'small: one copy',
    ).to.have.length(1);
  });

  it('handles answers whose IDs come after the payload, or twice', () => {
    const chunk = workerWire({ message: { $case: 'chunk', value: { data: Buffer.from('ab') } } });
    const idField = Buffer.from(
      ExecuteResponse.encode({ ids: { ...ids, containerId: 'old' } }).finish(),
    );
    const lateIds = Buffer.from(ExecuteResponse.encode({ ids }).finish());
    const answer = decodeWorkerAnswer(Buffer.concat([idField, chunk, lateIds]));
    expect(answer.ids, 'the last IDs win').to.deep.equal(ids);
    const rewritten = { ...ids, workerId: 'w9' };
    const decoded = RequestExecutionResponse.decode(
      encodeClientAnswer({ kind: 'relayed', ids: rewritten, answer }),
    );
    expect(decoded).to.deep.equal({
      ids: rewritten,
      message: { $case: 'chunk', value: { data: Buffer.from('ab') } },
    });
  });

  it('reads bytes that are not protobuf as an undecodable message naming the problem (never a throw)', () => {
    const truncated = new BinaryWriter().uint32(18).uint32(50).finish();
    const message = decodeClientMessage(Buffer.from(truncated));
    expect(message.kind).to.equal('undecodable');
    expect(message.kind === 'undecodable' ? message.problem : '').to.match(
      /^could not decode the request message of \/readie\.v1\.ProxyService\/RequestExecution: premature end/,
    );
  });
});
