import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { Metadata } from '@grpc/grpc-js';
import { PayloadFormat } from '../../src/proto/gen/readie/v1/call.js';
import { ConfigError } from '../../src/shared/config.js';
import { CatalogueFormatError, parseCatalogueJson } from '../../src/events/catalogue.js';
import { checkpointsFor } from '../../src/worker/checkpoints/index.js';
import { readHeader, pythonVersionProblem, majorMinor } from '../../src/worker/execution/index.js';
import {
  decodeJsonBody,
  encodeFrame,
  encodeJsonFrame,
  ExecutorHelloSchema,
  FrameDecoder,
  FrameProtocolError,
  FrameType,
  InstallDoneSchema,
  MAX_FRAME_LENGTH,
  readFrameBody,
  ResultEndSchema,
} from '../../src/worker/executor-link/index.js';
import { tokenDigest } from '../../src/shared/bearer-token.js';
import { WorkerCredentials } from '../../src/worker/credentials.js';
import {
  NotTheRouterError,
  UnauthenticatedError,
  WorkerStartupError,
} from '../../src/worker/core/errors.js';
import { parseZygoteEvent } from '../../src/worker/core/sandbox/zygote-events.js';
import type { StatusError } from '../../src/shared/status-error.js';
import { advertisedAddress, resolveWorkerOptions, stateDirTag } from '../../src/worker/options.js';
import {
  fetchCommand,
  installCommand,
  requirementProblem,
} from '../../src/worker/packages/index.js';
import {
  CgroupLimitError,
  ContainerCgroup,
  containerSpec,
  describeExit,
  findCgroupHierarchies,
  findMemoryHierarchy,
  readCounter,
  socketPathProblem,
  tmpSize,
} from '../../src/worker/sandbox/index.js';
import { CATALOGUE } from '../support/catalogues.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

describe('worker units', () => {
  describe('executor frames', () => {
    it('decodes frames split at every byte boundary, in order', () => {
      const bytes = Buffer.concat([
        encodeFrame(FrameType.PAYLOAD, Buffer.from('hello')),
        encodeFrame(FrameType.PAYLOAD_END),
        encodeJsonFrame(FrameType.CALL, { format: 'json-call' }),
      ]);
      for (let split = 1; split < bytes.length; split += 1) {
        const decoder = new FrameDecoder();
        const frames = [
          ...decoder.push(bytes.subarray(0, split)),
          ...decoder.push(bytes.subarray(split)),
        ];
        expect(frames.map((frame) => frame.type)).to.deep.equal([
          FrameType.PAYLOAD,
          FrameType.PAYLOAD_END,
          FrameType.CALL,
        ]);
        expect(frames[0]!.body.toString()).to.equal('hello');
        expect(decodeJsonBody(frames[2]!)).to.deep.equal({ format: 'json-call' });
        expect(decoder.buffered).to.equal(0);
      }
    });

    it('refuses an oversized frame on both sides', () => {
      expect(() => encodeFrame(FrameType.RESULT, Buffer.alloc(MAX_FRAME_LENGTH))).to.throw(
        FrameProtocolError,
      );
      const header = Buffer.alloc(5);
      header.writeUInt32BE(MAX_FRAME_LENGTH + 1, 0);
      expect(() => new FrameDecoder().push(header)).to.throw(FrameProtocolError, /outside/);
    });

    it('checks what the executor sends against the protocol instead of trusting it', () => {
      const frame = (type: FrameType, value: unknown) => {
        const [decoded] = new FrameDecoder().push(encodeJsonFrame(type, value));
        return decoded!;
      };
      expect(
        readFrameBody(frame(FrameType.RESULT_END, { ok: true, ms: 1.5 }), ResultEndSchema),
      ).to.deep.equal({ ok: true, ms: 1.5 });
      expect(() =>
        readFrameBody(frame(FrameType.RESULT_END, { ok: 'yes', ms: 1 }), ResultEndSchema),
      ).to.throw(FrameProtocolError, 'the RESULT_END frame does not fit the protocol: field "ok"');
      // What the function raised is bounded: the executor runs beside the tenant's code.
      const raised = { type: 'ValueError', message: 'bad', traceback: 'Traceback ...' };
      expect(
        readFrameBody(frame(FrameType.RESULT_END, { ok: false, ms: 2, raised }), ResultEndSchema),
      ).to.deep.equal({ ok: false, ms: 2, raised });
      for (const [field, hostile] of [
        ['type', { ...raised, type: '' }],
        ['message', { ...raised, message: 'x'.repeat(1025) }],
        ['traceback', { ...raised, traceback: 'x'.repeat(8193) }],
        ['type', { ...raised, type: 'T'.repeat(257) }],
      ] as const) {
        expect(() =>
          readFrameBody(
            frame(FrameType.RESULT_END, { ok: false, ms: 1, raised: hostile }),
            ResultEndSchema,
          ),
        ).to.throw(FrameProtocolError, `field "raised.${field}"`);
      }
      expect(() =>
        readFrameBody(frame(FrameType.INSTALL_DONE, { ok: false }), InstallDoneSchema),
      ).to.throw(FrameProtocolError, 'field "message" is required but missing');
      const hello = {
        protocol: 1,
        python: '3.11.2',
        container: 'c-1',
        checkpoint: '',
        modules: ['numpy'],
        dns: { ok: true, detail: '' },
      };
      expect(readFrameBody(frame(FrameType.HELLO, hello), ExecutorHelloSchema)).to.deep.equal(
        hello,
      );
      expect(() =>
        readFrameBody(frame(FrameType.HELLO, { ...hello, modules: 'numpy' }), ExecutorHelloSchema),
      ).to.throw(FrameProtocolError, 'field "modules"');
    });
  });

  describe('zygote events', () => {
    it('reads the events a zygote writes and says what is wrong with any other line', () => {
      expect(parseZygoteEvent('{"event":"spawned","container":"c-1","pid":42}')).to.deep.equal({
        ok: true,
        event: { event: 'spawned', container: 'c-1', pid: 42 },
      });
      expect(
        parseZygoteEvent(
          '{"event":"exited","container":"c-1","pid":42,"code":null,"signal":9,"extra":1}',
        ).ok,
      ).to.equal(true);
      // A container's network namespace is ready for its slirp4netns (--network egress).
      expect(parseZygoteEvent('{"event":"network","container":"c-1"}')).to.deep.equal({
        ok: true,
        event: { event: 'network', container: 'c-1' },
      });
      expect(parseZygoteEvent('{"event":"network"}')).to.deep.include({ ok: false });
      expect(parseZygoteEvent('{"event":"spawned","container":"c-1","pid":"42"}')).to.deep.equal({
        ok: false,
        problem: 'spawned event: field "pid" expected an integer >= 1, got "42"',
      });
      expect(parseZygoteEvent('{"event":"exploded"}')).to.deep.equal({
        ok: false,
        problem: 'unknown event "exploded"',
      });
      expect(parseZygoteEvent('print("hello")').ok).to.equal(false);
    });
  });

  describe('call header', () => {
    const context = { workerId: 'w1', defaultMemory: 1024, sandboxPython: '3.11.2' };
    const message = (fields: object) => ({
      message: {
        $case: 'header' as const,
        value: {
          ids: {
            requestId: 'r',
            sessionId: '',
            workerId: 'w1',
            containerId: '',
            checkpointId: '',
            version: '',
            routingRevision: 0,
          },
          memory: 0,
          gpu: false,
          imports: [],
          packages: [],
          pythonVersion: '',
          format: PayloadFormat.PAYLOAD_FORMAT_JSON_CALL,
          version: '',
          coldLoad: false,
          routingRevision: 0,
          tenantId: '',
          ...fields,
        },
      },
    });

    it('reads a header, defaulting an absent budget to DEFAULT_MEMORY', () => {
      const call = readHeader(message({}), context);
      expect(call).to.deep.include({ requestId: 'r', memory: 1024, format: 'json-call' });
    });

    it('refuses with the gRPC code the call must end with', () => {
      const codeOf = (fields: object) => {
        try {
          readHeader(message(fields), context);
          return 'OK';
        } catch (error) {
          return (error as StatusError).code;
        }
      };
      expect(codeOf({ pythonVersion: '3.10.4' })).to.equal('FAILED_PRECONDITION');
      expect(codeOf({ format: PayloadFormat.PAYLOAD_FORMAT_UNSPECIFIED })).to.equal(
        'INVALID_ARGUMENT',
      );
      expect(codeOf({ packages: ['-e .'] })).to.equal('INVALID_ARGUMENT');
      expect(
        codeOf({
          ids: { requestId: '', sessionId: '', workerId: '', containerId: '', checkpointId: '' },
        }),
      ).to.equal('INVALID_ARGUMENT');
      expect(() => readHeader(undefined, context)).to.throw(/must be a CallHeader/);
    });

    it('compares Python versions by major.minor, and lets a client that names none through', () => {
      expect(majorMinor('3.11.2')).to.equal('3.11');
      expect(pythonVersionProblem('3.11.9', '3.11.2')).to.equal(null);
      expect(pythonVersionProblem('', '3.11.2')).to.equal(null);
      expect(pythonVersionProblem('3.12.0', '3.11.2')).to.include('3.12.0').and.include('3.11.2');
      expect(pythonVersionProblem('banana', '3.11.2')).to.include('not a version');
    });
  });

  describe('package installs', () => {
    it('installs offline inside the container, from local directories only, with pip or uv', () => {
      const pip = installCommand({ kind: 'pip' }, '/usr/bin/python3', ['/d', '/w'], '/p', ['a==1']);
      expect(pip.argv.slice(0, 6)).to.deep.equal([
        '/usr/bin/python3',
        '-m',
        'pip',
        'install',
        '--prefix',
        '/p',
      ]);
      expect(pip.argv.slice(-7)).to.deep.equal([
        '--no-index',
        '--find-links',
        '/d',
        '--find-links',
        '/w',
        '--',
        'a==1',
      ]);
      expect(pip.env).to.deep.equal({ PIP_CONFIG_FILE: '/dev/null' });
      const uv = installCommand({ kind: 'uv', uv: '/usr/bin/uv' }, 'py', ['/d'], '/p', ['b']);
      expect(uv.argv).to.deep.equal([
        '/usr/bin/uv',
        'pip',
        'install',
        '--python',
        'py',
        '--prefix',
        '/p',
        '--no-index',
        '--find-links',
        '/d',
        '--',
        'b',
      ]);
      expect(uv.env).to.include({ UV_NO_CONFIG: '1' });
    });

    it("compiles an image's bytecode at its install (uv only when asked; pip always does)", () => {
      const compiled = { compileBytecode: true };
      const uv = { kind: 'uv', uv: '/usr/bin/uv' } as const;
      const plain = installCommand(uv, 'py', ['/d'], '/p', ['b']).argv;
      // The flag right after the prefix; everything else as without it.
      expect(installCommand(uv, 'py', ['/d'], '/p', ['b'], compiled).argv).to.deep.equal([
        ...plain.slice(0, plain.indexOf('/p') + 1),
        '--compile-bytecode',
        ...plain.slice(plain.indexOf('/p') + 1),
      ]);
      expect(installCommand({ kind: 'pip' }, 'py', ['/d'], '/p', ['b'], compiled)).to.deep.equal(
        installCommand({ kind: 'pip' }, 'py', ['/d'], '/p', ['b']),
      );
    });

    it('fetches wheels on the host from an index (never sources), and not at all from a wheel directory alone', () => {
      const both = fetchCommand(
        'py',
        { indexUrl: 'https://m/simple', wheelDir: '/w' },
        '/dl',
        '/cache',
        ['b'],
      )!;
      expect(both.argv.slice(0, 6)).to.deep.equal(['py', '-m', 'pip', 'download', '--dest', '/dl']);
      expect(both.argv).to.include('--only-binary=:all:');
      expect(both.argv.slice(-6)).to.deep.equal([
        '--index-url',
        'https://m/simple',
        '--find-links',
        '/w',
        '--',
        'b',
      ]);
      expect(both.env).to.deep.equal({ PIP_CONFIG_FILE: '/dev/null' });
      expect(fetchCommand('py', { indexUrl: null, wheelDir: '/w' }, '/dl', '/c', ['b'])).to.equal(
        null,
      );
      // Neither configured: pip's own configuration on the host decides where from.
      const own = fetchCommand('py', { indexUrl: null, wheelDir: null }, '/dl', '/c', ['c'])!;
      expect(own.env).to.deep.equal({});
      expect(own.argv).not.to.include('--index-url');
    });

    it('refuses requirements that are options or span lines', () => {
      expect(requirementProblem('numpy>=1.24')).to.equal(null);
      expect(requirementProblem('requests [socks] >= 2')).to.equal(null);
      expect(requirementProblem('--index-url=x')).to.include('installer option');
      expect(requirementProblem('a\nb')).to.include('line break');
      expect(requirementProblem(' ')).to.include('empty');
    });
  });

  describe('sandbox', () => {
    after(cleanTempDirs);

    it('refuses to lower a v2 limit below usage, as v1 does, instead of letting the kernel reclaim', async () => {
      // A directory of plain files standing in for a v2 cgroup: this host may run v1.
      const dir = tempDir('rw-cgroup-v2-');
      const mib = 1024 * 1024;
      writeFileSync(join(dir, 'memory.max'), 'max');
      writeFileSync(join(dir, 'memory.current'), '0');
      const cgroup = new ContainerCgroup(2, dir);
      await cgroup.setLimit(400 * mib);
      writeFileSync(join(dir, 'memory.current'), String(300 * mib));
      let refusal: unknown = null;
      await cgroup.setLimit(200 * mib).catch((error: unknown) => (refusal = error));
      expect(refusal).to.be.instanceOf(CgroupLimitError);
      expect((refusal as Error).message).to.include(`it uses ${300 * mib} bytes`);
      expect(readFileSync(join(dir, 'memory.max'), 'utf8')).to.equal(String(400 * mib));
      expect(cgroup.limit).to.equal(400 * mib);
      await cgroup.setLimit(350 * mib);
      await cgroup.setLimit(500 * mib);
      expect(readFileSync(join(dir, 'memory.max'), 'utf8')).to.equal(String(500 * mib));
      expect(cgroup.limit).to.equal(500 * mib);
    });

    it('bounds socket buffers by the memory limit on v1, and sets the pids limit in its own hierarchy', async () => {
      // Plain files standing in for a container's v1 memory and pids cgroups.
      const memory = tempDir('rw-cgroup-v1-memory-');
      const pids = tempDir('rw-cgroup-v1-pids-');
      const mib = 1024 * 1024;
      for (const file of ['memory.limit_in_bytes', 'memory.kmem.tcp.limit_in_bytes']) {
        writeFileSync(join(memory, file), '9223372036854771712');
      }
      writeFileSync(join(pids, 'pids.max'), 'max');
      const cgroup = new ContainerCgroup(1, memory, pids);
      await cgroup.setLimit(128 * mib);
      cgroup.setPidsLimit(64);
      expect(readFileSync(join(memory, 'memory.kmem.tcp.limit_in_bytes'), 'utf8')).to.equal(
        String(128 * mib),
      );
      expect(readFileSync(join(pids, 'pids.max'), 'utf8')).to.equal('64');
      expect(cgroup.procsFiles).to.deep.equal([
        join(memory, 'cgroup.procs'),
        join(pids, 'cgroup.procs'),
      ]);
      // v2: one directory holds both controllers.
      const unified = tempDir('rw-cgroup-v2-');
      writeFileSync(join(unified, 'memory.max'), 'max');
      writeFileSync(join(unified, 'pids.max'), 'max');
      const v2 = new ContainerCgroup(2, unified);
      v2.setPidsLimit(32);
      expect(readFileSync(join(unified, 'pids.max'), 'utf8')).to.equal('32');
      expect(v2.procsFiles).to.deep.equal([join(unified, 'cgroup.procs')]);
    });

    it('finds the memory hierarchy in mountinfo: v1 memory first, else cgroup2', () => {
      const hybrid = [
        '35 25 0:30 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw',
        '36 25 0:31 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory',
      ].join('\n');
      expect(findMemoryHierarchy(hybrid)).to.deep.equal({
        version: 1,
        mountPoint: '/sys/fs/cgroup/memory',
      });
      expect(
        findMemoryHierarchy('30 1 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate'),
      ).to.deep.equal({
        version: 2,
        mountPoint: '/sys/fs/cgroup',
      });
      expect(findMemoryHierarchy('1 0 8:1 / / rw - ext4 /dev/sda1 rw')).to.equal(null);
      const withPids = `${hybrid}\n37 25 0:32 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids`;
      expect(findCgroupHierarchies(withPids)).to.deep.equal({
        version: 1,
        memory: '/sys/fs/cgroup/memory',
        pids: '/sys/fs/cgroup/pids',
      });
      expect(findCgroupHierarchies(hybrid)).to.deep.include({ pids: null });
      expect(
        findCgroupHierarchies('30 1 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate'),
      ).to.deep.equal({ version: 2, unified: '/sys/fs/cgroup' });
      expect(readCounter('oom_kill_disable 0\nunder_oom 0\noom_kill 2\n', 'oom_kill')).to.equal(2);
    });

    it('describes how a container ended in words a user can act on', () => {
      const memory = { oomKilled: false, limitText: '128MiB' };
      expect(describeExit({ code: null, signal: 9 }, { ...memory, oomKilled: true })).to.include(
        'ran out of memory: it was killed when it exceeded its memory budget of 128MiB',
      );
      expect(describeExit({ code: null, signal: 11 }, memory)).to.equal(
        'the executor was killed by SIGSEGV (a crash in native code)',
      );
      expect(describeExit({ code: 3, signal: null }, memory)).to.include('exited with code 3');
      expect(
        describeExit({ code: 70, signal: null, sandboxError: 'mount failed' }, memory),
      ).to.include('sandbox could not start: mount failed');
    });

    it("keeps the worker's secrets out of a container spec and masks the state directory", () => {
      const spec = containerSpec({
        containerId: 'c-1',
        workerId: 'w',
        stateDir: '/var/lib/readie/w',
        cgroupProcs: ['/sys/fs/cgroup/memory/readie/w/c-1/cgroup.procs'],
        uid: 2000000001,
        gid: 2000000001,
        workerPid: 1,
        network: 'egress',
        hardened: true,
        tmpSize: 1024,
        hide: ['/srv/readie', '/var/lib/readie/w'],
        wheelDir: '/srv/wheels',
      });
      expect(spec.hide).to.deep.equal(['/var/lib/readie/w', '/srv/readie']);
      expect(spec.socket).to.equal('/var/lib/readie/w/containers/c-1/executor.sock');
      expect(spec.binds).to.deep.equal([
        { source: '/var/lib/readie/w/containers/c-1/downloads', target: '/tmp/.readie/downloads' },
        { source: '/srv/wheels', target: '/tmp/.readie/wheels' },
        { source: '/var/lib/readie/w/containers/c-1/resolv.conf', target: '/etc/resolv.conf' },
      ]);
      expect(Object.keys(spec.env).sort()).to.deep.equal(
        [
          'HOME',
          'LANG',
          'PATH',
          'PYTHONDONTWRITEBYTECODE',
          'READIE_CONTAINER_ID',
          'READIE_WORKER_ID',
          'TMPDIR',
        ].sort(),
      );
      expect(socketPathProblem('/tmp/x', 'c-0123456789')).to.equal(null);
      expect(socketPathProblem(`/tmp/${'d'.repeat(100)}`, 'c-0123456789')).to.include(
        '--state-dir',
      );
    });
  });

  describe('options', () => {
    const flags = {
      router: 'r:1',
      listen: '0.0.0.0:7000',
      id: 'w-1',
      flavor: 'gpu',
      insecure: true,
      auth: 'single-token',
    };

    it('reads flags over environment variables over defaults', () => {
      const options = resolveWorkerOptions(
        { ...flags, memory: '2GiB' },
        {
          WORKER_MAX_EXECUTORS: '3',
          WORKER_GPU_MEMORY: '16GiB',
          DIAL_TOTAL_TIMEOUT: '5s',
          READIE_AUTH_TOKEN: 't',
        },
        { totalMemory: 1000 },
      );
      expect(options).to.deep.include({
        workerId: 'w-1',
        flavor: 'gpu',
        memoryTotal: 2 * 1024 ** 3,
        gpuMemoryTotal: 16 * 1024 ** 3,
        stateDir: '/var/lib/readie/w-1',
        python: '/usr/bin/python3',
        cgroupParent: `readie/w-1-${stateDirTag('/var/lib/readie/w-1')}`,
        auth: { mode: 'single-token', token: 't' },
        security: { insecure: true },
      });
      expect(options.config.WORKER_MAX_EXECUTORS).to.equal(3);
      expect(options.config.DIAL_TOTAL_TIMEOUT).to.equal(5000);
      const flagged = resolveWorkerOptions(
        { ...flags, maxContainers: '9' },
        { WORKER_MAX_EXECUTORS: '3', READIE_AUTH_TOKEN: 't' },
        { totalMemory: 1 },
      );
      expect(flagged.config.WORKER_MAX_EXECUTORS).to.equal(9);
      expect(
        resolveWorkerOptions({ ...flags, auth: 'none' }, {}, { totalMemory: 1234 }).memoryTotal,
      ).to.equal(1234);
      const tokens = resolveWorkerOptions(
        { ...flags, auth: undefined, tokenFile: 'own.token' },
        { WORKER_ROUTER_TOKEN_FILE: '/etc/readie/router.sha256' },
        { totalMemory: 1 },
      );
      expect(tokens.auth).to.deep.equal({
        mode: 'tokens',
        tokenFile: join(process.cwd(), 'own.token'),
        routerTokenFile: '/etc/readie/router.sha256',
      });
    });

    it('reads the sandbox settings, with defaults that hold every container to its own uid and limits', () => {
      const open = { ...flags, auth: 'none' };
      const defaults = resolveWorkerOptions(open, {}, { totalMemory: 1 }).sandbox;
      expect(defaults).to.deep.equal({
        network: 'none',
        uids: { first: 2_000_000_000, count: 65536 },
        pidsLimit: 1024,
        tmpQuota: { share: 0.5 },
        hide: [],
        hardened: true,
      });
      const set = resolveWorkerOptions(
        { ...open, network: 'egress', hide: '/srv/a, /srv/b' },
        { WORKER_SANDBOX_UIDS: '300000-300009', WORKER_PIDS_LIMIT: '64', WORKER_TMP_SIZE: '1GiB' },
        { totalMemory: 1 },
      ).sandbox;
      expect(set).to.deep.include({
        network: 'egress',
        uids: { first: 300000, count: 10 },
        pidsLimit: 64,
        tmpQuota: { bytes: 1024 ** 3 },
        hide: ['/srv/a', '/srv/b'],
      });
      // Two workers with one ID and different state directories never share a cgroup.
      const elsewhere = resolveWorkerOptions(
        { ...open, stateDir: '/srv/other/w-1' },
        {},
        { totalMemory: 1 },
      );
      expect(elsewhere.cgroupParent).not.to.equal(
        resolveWorkerOptions(open, {}, { totalMemory: 1 }).cgroupParent,
      );
      expect(tmpSize({ share: 0.5 }, 256 * 1024 ** 2)).to.equal(128 * 1024 ** 2);
      expect(tmpSize({ share: 0.5 }, 1024)).to.equal(16 * 1024 ** 2);
      expect(tmpSize({ bytes: 1024 ** 3 }, 1024)).to.equal(1024 ** 3);
    });

    it('says which flag is wrong', () => {
      const fails =
        (extra: object, env: Record<string, string> = {}) =>
        () =>
          resolveWorkerOptions({ ...flags, ...extra }, env, { totalMemory: 1 });
      expect(fails({ flavor: 'tpu' })).to.throw(ConfigError, '--flavor must be one of cpu, gpu');
      expect(fails({ router: undefined })).to.throw(
        ConfigError,
        '--router is required (or set WORKER_ROUTER)',
      );
      expect(fails({ listen: 'nope' })).to.throw(ConfigError, '--listen: "nope" is not an address');
      expect(fails({ router: 'router:99999' })).to.throw(ConfigError, '--router: "router:99999"');
      expect(fails({ standby: '-1' })).to.throw(ConfigError, '--standby: "-1" is not a whole');
      expect(fails({ maxContainers: 'x' })).to.throw(ConfigError, 'WORKER_MAX_EXECUTORS: "x"');
      expect(fails({ memory: 'lots' })).to.throw(ConfigError, '--memory');
      expect(fails({ insecure: false })).to.throw(
        ConfigError,
        'TLS needs --tls-cert and --tls-key',
      );
      expect(fails({ id: 'bad/id' })).to.throw(ConfigError, '--id');
      // Credentials: the tokens mode by default, and the development modes only when asked for.
      expect(fails({ auth: undefined })).to.throw(
        ConfigError,
        /--token-file FILE .*--router-token-file/,
      );
      expect(fails({ auth: undefined, tokenFile: 'x' })).to.throw(
        ConfigError,
        /--router-token-file/,
      );
      expect(fails({ auth: 'single-token' })).to.throw(ConfigError, /needs READIE_AUTH_TOKEN/);
      expect(fails({ auth: 'none', tokenFile: 'x' })).to.throw(ConfigError, /not --auth none/);
      expect(fails({ auth: 'open' })).to.throw(ConfigError, /--auth must be one of/);
      expect(fails({ network: 'host' })).to.throw(
        ConfigError,
        '--network must be one of none, egress',
      );
      expect(fails({ sandboxUids: '0-10' })).to.throw(ConfigError, '--sandbox-uids "0-10"');
      expect(fails({ sandboxUids: '9-5' })).to.throw(ConfigError, '--sandbox-uids "9-5"');
      expect(fails({ sandboxUids: 'many' })).to.throw(ConfigError, 'expected FIRST-LAST');
      expect(fails({ pidsLimit: '0' })).to.throw(ConfigError, '--pids-limit must be at least 1');
      expect(fails({ tmpSize: '150%' })).to.throw(ConfigError, '--tmp-size "150%"');
      expect(fails({ tmpSize: 'big' })).to.throw(ConfigError, '--tmp-size "big"');
    });

    it('advertises the bound port, with the hostname for a wildcard listen address', () => {
      expect(advertisedAddress(null, '0.0.0.0:0', 4321, 'node7')).to.equal('node7:4321');
      expect(advertisedAddress(null, '127.0.0.1:0', 4321, 'node7')).to.equal('127.0.0.1:4321');
      expect(advertisedAddress('w.example:1', '0.0.0.0:0', 4321, 'node7')).to.equal('w.example:1');
    });
  });

  describe('catalogue', () => {
    it('reads the catalogue shape and picks the checkpoints of a flavor', () => {
      const catalogue = parseCatalogueJson(JSON.stringify(CATALOGUE), 'test');
      expect(checkpointsFor(catalogue, 'gpu').map((c) => c.id)).to.deep.equal(['gpu-only']);
      expect(checkpointsFor(catalogue, 'tpu')).to.deep.equal([]);
      expect(checkpointsFor(null, 'cpu')).to.deep.equal([]);
    });

    it('names the file and the field that is wrong', () => {
      expect(() => parseCatalogueJson('{', 'cat.json')).to.throw(
        CatalogueFormatError,
        'catalogue cat.json: not valid JSON',
      );
      expect(() => parseCatalogueJson('{"flavors": {}, "importCosts": {}}', 'cat.json')).to.throw(
        CatalogueFormatError,
        /catalogue cat.json: field "defaultImportCost" is required but missing/,
      );
    });
  });

  describe('credentials', () => {
    afterEach(cleanTempDirs);
    const metadata = (...values: string[]) => {
      const m = new Metadata();
      for (const value of values) m.add('authorization', value);
      return m;
    };
    const ROUTER = 'router-token-0123456789abcdef';
    const OWN = 'worker-token-0123456789abcdef';

    function files(own: string, router: string): { tokenFile: string; routerTokenFile: string } {
      const dir = tempDir();
      writeFileSync(join(dir, 'own'), `${own}\n`, { mode: 0o600 });
      writeFileSync(join(dir, 'router'), router, { mode: 0o600 });
      return { tokenFile: join(dir, 'own'), routerTokenFile: join(dir, 'router') };
    }

    it("accepts the router's token alone on ExecutionService, and reports with its own", () => {
      const credentials = new WorkerCredentials({ mode: 'tokens', ...files(OWN, `${ROUTER}\n`) });
      expect(() => credentials.checkRouter(metadata(`Bearer ${ROUTER}`))).to.not.throw();
      expect(() => credentials.checkRouter(metadata())).to.throw(
        UnauthenticatedError,
        /from the router alone/,
      );
      expect(() => credentials.checkRouter(metadata('Bearer a-client-token-1234567'))).to.throw(
        UnauthenticatedError,
        /not the router's credential/,
      );
      expect(() => credentials.checkRouter(metadata(`Bearer ${OWN}`))).to.throw(
        NotTheRouterError,
        /worker's own credential/,
      );
      expect(() =>
        credentials.checkRouter(metadata(`Bearer ${ROUTER}`, `Bearer ${ROUTER}`)),
      ).to.throw(UnauthenticatedError);
      expect(credentials.reportMetadata().get('authorization')).to.deep.equal([`Bearer ${OWN}`]);
      expect(credentials.warnings).to.deep.equal([]);
    });

    it("takes the router's token as its digest, several while one is rotated, and reloads", () => {
      const paths = files(OWN, `# the router\n${tokenDigest(ROUTER)}\n`);
      const credentials = new WorkerCredentials({ mode: 'tokens', ...paths });
      expect(() => credentials.checkRouter(metadata(`Bearer ${ROUTER}`))).to.not.throw();
      const next = 'next-router-token-0123456789';
      expect(() => credentials.checkRouter(metadata(`Bearer ${next}`))).to.throw();
      writeFileSync(paths.routerTokenFile, `${tokenDigest(ROUTER)}\n${next}\n`);
      credentials.reload();
      expect(() => credentials.checkRouter(metadata(`Bearer ${next}`))).to.not.throw();
      expect(() => credentials.checkRouter(metadata(`Bearer ${ROUTER}`))).to.not.throw();
      // A bad file is refused and the credentials in force stay.
      writeFileSync(paths.routerTokenFile, 'short\n');
      expect(() => credentials.reload()).to.throw(WorkerStartupError, /at least 16 characters/);
      expect(() => credentials.checkRouter(metadata(`Bearer ${next}`))).to.not.throw();
    });

    it('refuses files it cannot use, saying which and why, never echoing a token', () => {
      const make = (own: string, router: string) => () =>
        new WorkerCredentials({ mode: 'tokens', ...files(own, router) });
      expect(make(OWN, OWN)).to.throw(WorkerStartupError, /hold the same token/);
      expect(make('', ROUTER)).to.throw(WorkerStartupError, /--token-file .*holds no token/);
      expect(make(tokenDigest(OWN), ROUTER)).to.throw(WorkerStartupError, /in clear/);
      expect(make(OWN, 'sha256:abc')).to.throw(WorkerStartupError, /line 1: a digest is/);
      expect(make(OWN, '# nothing\n')).to.throw(WorkerStartupError, /lists no token/);
      expect(make('short', ROUTER))
        .to.throw(WorkerStartupError)
        .that.satisfies((error: Error) => !error.message.includes('short'));
      const open = files(OWN, ROUTER);
      chmodSync(open.tokenFile, 0o644);
      expect(new WorkerCredentials({ mode: 'tokens', ...open }).warnings).to.deep.equal([
        `--token-file ${open.tokenFile} is mode 0644: make it 0600 (chmod 600), readable by the worker's user alone`,
      ]);
    });

    it('in the development modes: one shared token both ways, or no check at all', () => {
      const shared = new WorkerCredentials({ mode: 'single-token', token: 't' });
      expect(() => shared.checkRouter(metadata('Bearer t'))).to.not.throw();
      expect(() => shared.checkRouter(metadata('Bearer x'))).to.throw(UnauthenticatedError);
      expect(shared.reportMetadata().get('authorization')).to.deep.equal(['Bearer t']);
      const none = new WorkerCredentials({ mode: 'none' });
      expect(() => none.checkRouter(metadata())).to.not.throw();
      expect(none.reportMetadata().get('authorization')).to.deep.equal([]);
    });
  });
});
