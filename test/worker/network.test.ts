/**
 * The two network modes (`--network none`, the default, and `egress`) from inside real
 * containers, and package installs from an index in both: the worker fetches on the host side,
 * so an install works while the container itself cannot reach the index.
 */
import { expect } from 'chai';
import type { Server } from 'node:net';
import { LogSource } from '../../src/proto/gen/readie/v1/call.js';
import { hostAddress, listenOn } from '../support/network.js';
import { servePackageIndex, type PackageIndex } from '../support/package-index.js';
import { buildWheel } from '../support/python.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';
import {
  envelopeOf,
  execute,
  header,
  jsonCall,
  logText,
  py,
  startHarness,
  type Harness,
} from '../support/worker-harness.js';

/** Imports the installed package and tries to reach `targets` itself. */
const USE_AND_DIAL = py`
  import socket
  def use(targets):
      import readie_indexed
      out = {"greeting": readie_indexed.greet(), "file": readie_indexed.__file__}
      for host, port in targets:
          s = socket.socket()
          s.settimeout(3)
          try:
              s.connect((host, port))
              out[f"{host}:{port}"] = "connected"
          except OSError as error:
              out[f"{host}:{port}"] = error.errno
          finally:
              s.close()
      return out
`;

/** One DNS query to the first nameserver of /etc/resolv.conf: whether anything answered. */
const DNS = py`
  import os, socket, struct
  def dns():
      with open("/etc/resolv.conf") as conf:
          servers = [line.split()[1] for line in conf if line.startswith("nameserver")]
      query = struct.pack(">HHHHHH", 0x5eed, 0x0100, 1, 0, 0, 0) + b"\\x07example\\x03com\\x00\\x00\\x01\\x00\\x01"
      s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
      s.settimeout(5)
      try:
          s.sendto(query, (servers[0], 53))
          answer = s.recv(512)
          return {"servers": servers, "answered": answer[:2] == b"\\x5e\\xed"}
      except OSError as error:
          return {"servers": servers, "answered": False, "error": str(error)}
`;

function installHeader(sessionId = '') {
  return header({ packages: ['readie_indexed==1.0'], ids: { sessionId } });
}

async function wheelIndex(): Promise<PackageIndex> {
  const wheels = buildWheel(
    tempDir('rw-index-'),
    'readie_indexed',
    'def greet():\n    return "from the index"\n',
  );
  return servePackageIndex(wheels);
}

describe('network modes', function () {
  this.timeout(120_000);
  after(cleanTempDirs);

  describe('--network none (the default), installing from an index on the host loopback', () => {
    let harness: Harness;
    let index: PackageIndex;
    before(async () => {
      index = await wheelIndex();
      harness = await startHarness({ flags: { packageIndex: index.url } });
    });
    after(async () => {
      await harness?.stop();
      index?.close();
    });

    it('installs through a host-side fetch, while user code cannot reach the index', async () => {
      const result = await execute(
        harness.client,
        installHeader(),
        jsonCall(USE_AND_DIAL, 'use', [[['127.0.0.1', index.port]]]),
      );
      const out = envelopeOf(result).value as Record<string, unknown>;
      expect(out['greeting']).to.equal('from the index');
      expect(out['file']).to.match(/^\/tmp\/\.readie\/packages\//);
      expect(out[`127.0.0.1:${index.port}`]).to.equal(111);
      expect(index.requests).to.include('/simple/readie-indexed/');
      const system = logText(result, LogSource.LOG_SOURCE_SYSTEM).join('\n');
      expect(system).to.include('fetching readie_indexed==1.0 (wheels only) on the worker');
      expect(system).to.include('Successfully installed readie_indexed-1.0');
    });

    it('has no route out: the DNS step reports the mode, and a query to a nameserver gets no answer', async () => {
      const result = await execute(harness.client, header({}), jsonCall(DNS, 'dns'));
      const out = envelopeOf(result).value as { answered: boolean; error?: string };
      expect(out.answered).to.equal(false);
      expect(out.error).to.include('unreachable');
      expect(logText(result, LogSource.LOG_SOURCE_SYSTEM).join('\n')).not.to.include('DNS');
    });
  });

  describe('--network egress', () => {
    let harness: Harness;
    let index: PackageIndex;
    let outside: Server | null = null;
    before(async () => {
      index = await wheelIndex();
      harness = await startHarness({ flags: { network: 'egress', packageIndex: index.url } });
    });
    after(async () => {
      await harness?.stop();
      index?.close();
      outside?.close();
    });

    it('resolves names through slirp4netns: the DNS step works', async () => {
      const result = await execute(harness.client, header({}), jsonCall(DNS, 'dns'));
      const out = envelopeOf(result).value as { servers: string[]; answered: boolean };
      expect(out.servers).to.deep.equal(['10.0.2.3']);
      expect(out.answered, JSON.stringify(out)).to.equal(true);
      expect(logText(result, LogSource.LOG_SOURCE_SYSTEM).join('\n')).not.to.include(
        'DNS is not usable',
      );
    });

    it("reaches the world but never the host's loopback (the worker, the router, the index)", async () => {
      const address = hostAddress();
      outside = address ? await listenOn(address) : null;
      const outsidePort = outside ? (outside.address() as { port: number }).port : 0;
      const targets: [string, number][] = [
        ['127.0.0.1', harness.worker.port],
        ['10.0.2.2', harness.worker.port],
        ['10.0.2.2', index.port],
        ...(address ? ([[address, outsidePort]] as [string, number][]) : []),
      ];
      const result = await execute(
        harness.client,
        installHeader(),
        jsonCall(USE_AND_DIAL, 'use', [targets]),
      );
      const out = envelopeOf(result).value as Record<string, unknown>;
      expect(out['greeting']).to.equal('from the index');
      expect(out[`127.0.0.1:${harness.worker.port}`]).to.equal(111);
      // slirp4netns --disable-host-loopback: its gateway address leads nowhere.
      expect(out[`10.0.2.2:${harness.worker.port}`]).to.be.oneOf([101, 111]);
      expect(out[`10.0.2.2:${index.port}`]).to.be.oneOf([101, 111]);
      if (address) expect(out[`${address}:${outsidePort}`]).to.equal('connected');
      else
        console.log('      (no non-loopback IPv4 address here: egress to the world not checked)');
    });
  });
});
