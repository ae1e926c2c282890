/** The TypeScript client's pure parts: chunking, config, hints, envelopes, errors, IDs, settings. */
import { status as Status } from '@grpc/grpc-js';
import { expect } from 'chai';
import { buildCallConfig, importHints, sourceImports } from '../../src/client/call-config.js';
import {
  initialCallInfo,
  newRequestId,
  newSessionId,
  updateCallInfo,
} from '../../src/client/call-info.js';
import { MAX_CHUNK_BYTES, chunksOf } from '../../src/shared/chunks.js';
import { resolveConnection, callMetadata } from '../../src/client/connection.js';
import { RouterList, unsentRefusal } from '../../src/client/router-list.js';
import {
  ConfigurationError,
  errorFromStatus,
  NotFoundError,
  ProtocolError,
  ReadieError,
  RemoteExecutionError,
  SessionExpiredError,
} from '../../src/client/index.js';
import { decodeJsonEnvelope, encodeJsonCall } from '../../src/client/json-call.js';
import { PayloadFormat } from '../../src/proto/gen/readie/v1/call.js';
import { EXPECTED_ERRORS } from './expected-errors.js';

const MiB = 1024 * 1024;
const sizes = (length: number): number[] =>
  [...chunksOf(Buffer.alloc(length))].map((chunk) => chunk.length);

describe('TypeScript client parts', () => {
  describe('chunksOf', () => {
    it('cuts at 1 MiB: 0 bytes, exactly 1 MiB, 1 MiB + 1', () => {
      expect(MAX_CHUNK_BYTES).to.equal(1_048_576);
      expect(sizes(0)).to.deep.equal([]);
      expect(sizes(1)).to.deep.equal([1]);
      expect(sizes(MiB)).to.deep.equal([MiB]);
      expect(sizes(MiB + 1)).to.deep.equal([MiB, 1]);
    });

    it('cuts 64 MiB into 64 pieces that join back, without copying', () => {
      const payload = Buffer.alloc(64 * MiB, 7);
      const pieces = [...chunksOf(payload)];
      expect(pieces).to.have.length(64);
      expect(
        pieces.every((piece) => piece.length === MiB && piece.buffer === payload.buffer),
      ).to.equal(true);
      expect(Buffer.concat(pieces).equals(payload)).to.equal(true);
    });

    it('refuses a chunk size under one byte', () => {
      expect(() => [...chunksOf(Buffer.from('x'), 0)]).to.throw(RangeError);
    });
  });

  describe('buildCallConfig', () => {
    it('carries every option, sizes in bytes', () => {
      const config = buildCallConfig(
        'req-1',
        'ses-1',
        { module: 'torch.nn', function: 'f' },
        {
          memory: '512MiB',
          gpu: true,
          gpuMemory: 2048,
          checkpointId: 'ckpt-torch',
          disableOptimizedExecution: true,
          packages: ['tqdm>=4'],
          imports: ['numpy.linalg'],
          pythonVersion: '3.11',
        },
      );
      expect(config).to.deep.equal({
        requestId: 'req-1',
        sessionId: 'ses-1',
        imports: ['numpy', 'torch'],
        memory: 512 * MiB,
        gpuMemory: 2048,
        gpu: true,
        disableOptimizedExecution: true,
        packages: ['tqdm>=4'],
        checkpointId: 'ckpt-torch',
        pythonVersion: '3.11',
        format: PayloadFormat.PAYLOAD_FORMAT_JSON_CALL,
        pinned: false,
        retryOf: '',
        function: 'torch.nn.f',
      });
    });

    it('carries an image as declared, and refuses one that is not a list of strings', () => {
      const config = buildCallConfig(
        'req-1',
        '',
        { module: 'm', function: 'f' },
        { image: { packages: ['tomli==2.0.1'], imports: ['tomli'], env: { MODE: 'x' } } },
      );
      expect(config.image).to.deep.equal({
        packages: ['tomli==2.0.1'],
        imports: ['tomli'],
        env: { MODE: 'x' },
      });
      expect(buildCallConfig('req-1', '', { module: 'm', function: 'f' })).to.not.have.property(
        'image',
      );
      expect(() =>
        buildCallConfig(
          'req-1',
          '',
          { module: 'm', function: 'f' },
          {
            image: { packages: 'tomli' as unknown as string[] },
          },
        ),
      ).to.throw(TypeError, 'image.packages must be an array of strings');
    });

    it('leaves unset budgets absent', () => {
      const config = buildCallConfig('req-1', '', { module: 'm', function: 'f' });
      expect(config.memory).to.equal(undefined);
      expect(config.gpuMemory).to.equal(undefined);
      expect(config.packages).to.deep.equal([]);
    });

    it('refuses bad options', () => {
      const call = { module: 'm', function: 'f' };
      expect(() => buildCallConfig('r', '', call, { memory: 'lots' })).to.throw(/not a size/);
      expect(() => buildCallConfig('r', '', call, { memory: 0 })).to.throw(RangeError);
      expect(() => buildCallConfig('r', '', call, { memory: 1.5 })).to.throw(RangeError);
      const packages = 'tqdm' as unknown as string[];
      expect(() => buildCallConfig('r', '', call, { packages })).to.throw(TypeError);
      expect(() => buildCallConfig('r', '', call, { packages: [''] })).to.throw(TypeError);
      const image = { packages: ['tomli-w'] };
      expect(() => buildCallConfig('r', '', call, { pinned: true, image })).to.throw(
        TypeError,
        "pinned runs on the tenant's version: it cannot also name an image",
      );
      expect(buildCallConfig('r', '', call, { pinned: false, image })).to.have.property('image');
    });
  });

  describe('import hints', () => {
    it('reads import statements of source, skipping relative ones', () => {
      const source = [
        'import numpy as np, pandas',
        'import torch.nn as nn  # comment',
        'from sklearn.linear_model import Ridge',
        'from . import sibling',
        'from .rel import x',
        'def f():',
        '    import polars',
        '    from scipy import (sparse,',
        '        linalg)',
      ].join('\n');
      expect(sourceImports(source).sort()).to.deep.equal([
        'numpy',
        'pandas',
        'polars',
        'scipy',
        'sklearn',
        'torch',
      ]);
    });

    it('drops the standard library, keeps explicit hints, sorts', () => {
      expect(
        importHints({ source: 'import os, json\nimport numpy\n', function: 'f' }),
      ).to.deep.equal(['numpy']);
      expect(importHints({ module: 'json', function: 'dumps' })).to.deep.equal([]);
      expect(
        importHints({ module: 'numpy.linalg', function: 'norm' }, ['torch', 'aaa']),
      ).to.deep.equal(['aaa', 'numpy', 'torch']);
    });
  });

  describe('json-call payloads', () => {
    it('encodes module or source calls as UTF-8 JSON', () => {
      const byModule = JSON.parse(
        encodeJsonCall({
          module: 'pkg.mod',
          function: 'f',
          args: [1, 'é'],
          kwargs: { k: null },
        }).toString('utf8'),
      ) as unknown;
      expect(byModule).to.deep.equal({
        module: 'pkg.mod',
        source: null,
        function: 'f',
        args: [1, 'é'],
        kwargs: { k: null },
      });
      const bySource = JSON.parse(
        encodeJsonCall({ source: 'def g(): pass', function: 'g' }).toString(),
      ) as unknown;
      expect(bySource).to.deep.equal({
        module: null,
        source: 'def g(): pass',
        function: 'g',
        args: [],
        kwargs: {},
      });
    });

    it('refuses malformed calls', () => {
      const both = { module: 'm', source: 's', function: 'f' } as unknown as {
        module: string;
        function: string;
      };
      expect(() => encodeJsonCall(both)).to.throw(/exactly one/);
      expect(() => encodeJsonCall({ module: 'not a module', function: 'f' })).to.throw(TypeError);
      expect(() => encodeJsonCall({ module: 'm', function: 'f()' })).to.throw(TypeError);
      expect(() => encodeJsonCall({ module: 'm', function: 'f', args: [10n] })).to.throw(TypeError);
    });

    it('decodes ok and error envelopes', () => {
      const call = initialCallInfo('req-1', '');
      expect(decodeJsonEnvelope(Buffer.from('{"ok": true, "value": [1, 2]}'))).to.deep.equal([
        1, 2,
      ]);
      expect(decodeJsonEnvelope(Buffer.from('{"ok": true}'))).to.equal(null);
      const failed = Buffer.from(
        JSON.stringify({
          ok: false,
          error: {
            type: 'LinAlgError',
            module: 'numpy.linalg',
            message: 'Singular matrix',
            traceback: 'Traceback ...\n',
          },
        }),
      );
      let error: unknown;
      try {
        decodeJsonEnvelope(failed, call);
      } catch (thrown) {
        error = thrown;
      }
      expect(error).to.be.instanceOf(RemoteExecutionError);
      const remote = error as RemoteExecutionError;
      expect(remote.message).to.equal(
        'numpy.linalg.LinAlgError: Singular matrix\n\nRemote traceback:\nTraceback ...',
      );
      expect(remote.traceback).to.equal('Traceback ...\n');
      expect(remote.call).to.equal(call);
    });

    it('reports unreadable results as ProtocolError', () => {
      for (const body of ['not json', '[1]', '{"ok": "yes"}', '{"ok": false}']) {
        expect(() => decodeJsonEnvelope(Buffer.from(body)), body).to.throw(ProtocolError);
      }
    });
  });

  describe('errorFromStatus', () => {
    it("a tenant-service request's NOT_FOUND (a call's record or output, an image) is a NotFoundError, without a session's words or hint; a session's is a SessionExpiredError, itself a NotFoundError", () => {
      const missed = errorFromStatus(Status.NOT_FOUND, 'no call r1 of yours', {
        address: 'r:1',
        lookup: true,
      });
      expect(missed).to.be.instanceOf(NotFoundError).and.not.instanceOf(SessionExpiredError);
      expect(missed.name).to.equal('NotFoundError');
      expect(missed.message).to.equal('not found at r:1 (NOT_FOUND): no call r1 of yours');
      const expired = errorFromStatus(Status.NOT_FOUND, 'session expired');
      expect(expired).to.be.instanceOf(SessionExpiredError).and.instanceOf(NotFoundError);
      expect(expired.name).to.equal('SessionExpiredError');
    });

    it('maps every status code but OK to its class, with code, details and advice', () => {
      expect(EXPECTED_ERRORS.size).to.equal(16);
      const call = initialCallInfo('req-1', 'ses-1');
      for (const [code, ErrorClass] of EXPECTED_ERRORS) {
        const error = errorFromStatus(code, 'said the server', { address: 'router:443', call });
        expect(error, Status[code]).to.be.instanceOf(ErrorClass).and.instanceOf(ReadieError);
        expect(error.code).to.equal(code);
        expect(error.details).to.equal('said the server');
        expect(error.call).to.equal(call);
        expect(error.message)
          .to.include(Status[code])
          .and.include('router:443')
          .and.include('said the server');
        expect(error.name).to.equal(ErrorClass.name);
      }
      expect(
        errorFromStatus(
          Status.UNAVAILABLE,
          'No connection established. Last error: connect ECONNREFUSED 127.0.0.1:1',
          { address: 'r:1' },
        ).message,
      ).to.include('nothing listens at r:1: check READIE_ADDRESS');
      // A call that reached a worker never gets a hint about the router's address.
      expect(
        errorFromStatus(Status.UNAVAILABLE, 'worker w1: No connection established').message,
      ).to.not.include('READIE_ADDRESS');
      expect(errorFromStatus(Status.UNAUTHENTICATED, '').message).to.include('READIE_AUTH_TOKEN');
      expect(errorFromStatus(Status.OK, '')).to.be.instanceOf(ProtocolError);
    });
  });

  describe('call IDs', () => {
    it('makes request and session IDs', () => {
      expect(newRequestId()).to.match(/^req-[0-9a-f]{32}$/);
      expect(newSessionId()).to.match(/^ses-[0-9a-f]{32}$/);
      expect(newRequestId()).to.not.equal(newRequestId());
    });

    it('takes the worker answer as authoritative for the checkpoint', () => {
      const ids = {
        requestId: 'req-1',
        sessionId: '',
        workerId: 'w1',
        containerId: '',
        checkpointId: 'planned',
        version: '',
        routingRevision: 0,
      };
      const planned = updateCallInfo(initialCallInfo('req-1', 'ses-1'), ids);
      expect(planned).to.deep.include({
        sessionId: 'ses-1',
        workerId: 'w1',
        checkpointId: 'planned',
      });
      const cold = updateCallInfo(planned, { ...ids, containerId: 'c1', checkpointId: '' });
      expect(cold).to.deep.include({ containerId: 'c1', checkpointId: '' });
    });
  });

  describe('router lists', () => {
    const refusal = (details: string, trailers: Record<string, string> = {}) =>
      errorFromStatus(Status.UNAVAILABLE, details, { address: 'a:1', trailers });

    it('moves to the leader a standby names when listed, else to the next address', () => {
      const made: string[] = [];
      const list = new RouterList(['a:1', 'b:2', 'c:3'], (address) => made.push(address));
      expect(list.current.address).to.equal('a:1');
      expect(list.moveFrom('a:1', 'c:3').address).to.equal('c:3');
      expect(list.current.address, 'later calls start at the leader').to.equal('c:3');
      expect(list.moveFrom('c:3', 'elsewhere:9').address, 'an unlisted leader').to.equal('a:1');
      expect(list.moveFrom('a:1', 'a:1').address, 'itself named').to.equal('b:2');
      expect(made, 'stubs made once per address, on first use').to.deep.equal([
        'a:1',
        'c:3',
        'b:2',
      ]);
      expect(() => new RouterList([], () => 0)).to.throw(RangeError);
    });

    it('waits only after a full pass over the list', () => {
      const list = new RouterList(['a:1', 'b:2'], () => 0);
      const waits = [0, 1, 2, 3].map((move) => list.waitBefore(move, () => 0.999));
      expect(waits[0]).to.equal(0);
      expect(waits[2]).to.equal(0);
      expect(waits[1]).to.be.above(0);
      expect(waits[3]).to.be.above(waits[1] as number);
      expect(new RouterList(['n:1'], () => 0).waitBefore(0, () => 0)).to.be.above(0);
    });

    it('tells a refusal before anything was sent from a call that may have started', () => {
      const standby = refusal('this router is a standby', {
        'readie-not-started': '1',
        'readie-standby': '1',
      });
      expect(standby.standby).to.equal(true);
      expect(unsentRefusal(standby)).to.equal('standby');
      const named = refusal('standby', { 'readie-not-started': '1', 'readie-leader': 'b:2' });
      expect(named.leader).to.equal('b:2');
      expect(unsentRefusal(named)).to.equal('standby');
      expect(unsentRefusal(refusal('connect ECONNREFUSED 127.0.0.1:1'))).to.equal('unreachable');
      expect(unsentRefusal(refusal('No connection established. Last error: x'))).to.equal(
        'unreachable',
      );
      // A worker's refusal before the function is not a standby's: it does not move routers.
      expect(unsentRefusal(refusal('worker unreachable', { 'readie-not-started': '1' }))).to.equal(
        undefined,
      );
      expect(unsentRefusal(refusal('read ECONNRESET')), 'may have started').to.equal(undefined);
      expect(unsentRefusal(errorFromStatus(Status.INTERNAL, 'x'))).to.equal(undefined);
    });
  });

  describe('connection settings', () => {
    it('reads the environment; options win', () => {
      const env = { READIE_ADDRESS: 'router:443', READIE_AUTH_TOKEN: 't', READIE_INSECURE: '' };
      expect(resolveConnection({ env })).to.deep.equal({
        address: 'router:443',
        addresses: ['router:443'],
        insecure: false,
        rootCerts: undefined,
        token: 't',
      });
      expect(
        resolveConnection({ env, address: 'other:1', insecure: true, token: 'u' }),
      ).to.deep.include({
        address: 'other:1',
        insecure: true,
        token: 'u',
      });
      expect(
        resolveConnection({ env: { READIE_ADDRESS: 'a:1', READIE_INSECURE: 'yes' } }).insecure,
      ).to.equal(true);
      // A list of routers: comma-separated, blanks and repeats dropped, the first one named.
      expect(resolveConnection({ env: { READIE_ADDRESS: ' a:1, b:2,,a:1 ' } })).to.deep.include({
        address: 'a:1',
        addresses: ['a:1', 'b:2'],
      });
      expect(resolveConnection({ env, address: ['c:3', 'd:4'] }).addresses).to.deep.equal([
        'c:3',
        'd:4',
      ]);
      expect(() => resolveConnection({ env: { READIE_ADDRESS: ' , ' } })).to.throw(
        /no cluster address/,
      );
      expect(callMetadata(resolveConnection({ env })).get('authorization')).to.deep.equal([
        'Bearer t',
      ]);
    });

    it('says what is missing', () => {
      expect(() => resolveConnection({ env: {} })).to.throw(ConfigurationError, /READIE_ADDRESS/);
      expect(() =>
        resolveConnection({ env: { READIE_ADDRESS: 'a:1', READIE_INSECURE: 'maybe' } }),
      ).to.throw(ConfigurationError, /READIE_INSECURE/);
      expect(() =>
        resolveConnection({
          env: { READIE_ADDRESS: 'a:1', READIE_CA_FILE: '/nonexistent/ca.pem' },
        }),
      ).to.throw(ConfigurationError, /ca\.pem/);
    });
  });
});
