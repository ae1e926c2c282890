/**
 * A container's limits, tried from inside as a tenant exhausting them would: tasks (the pids
 * limit), socket buffers (charged against its memory budget) and /tmp (a tmpfs quota). Each is
 * refused at the container's own limit while the worker and the neighbours carry on.
 */
import { expect } from 'chai';
import { findCgroupHierarchies } from '../../src/worker/sandbox/index.js';
import { readFileSync } from 'node:fs';
import { cleanTempDirs } from '../support/temp.js';
import {
  envelopeOf,
  execute,
  header,
  jsonCall,
  py,
  startHarness,
  type Harness,
} from '../support/worker-harness.js';

const MiB = 1024 * 1024;
const PIDS_LIMIT = 48;

describe('container limits: exhausting them from inside', function () {
  this.timeout(120_000);
  let harness: Harness;
  before(async () => {
    harness = await startHarness({ flags: { pidsLimit: String(PIDS_LIMIT) } });
  });
  after(async () => {
    await harness?.stop();
    cleanTempDirs();
  });

  it('cannot start more tasks than its pids limit; the worker and its neighbours carry on', async () => {
    const bomb = py`
      import os, threading, time
      def bomb():
          stop = threading.Event()
          started, error = 0, None
          try:
              for _ in range(2000):
                  threading.Thread(target=stop.wait, daemon=True).start()
                  started += 1
          except RuntimeError as failure:
              error = str(failure)
          forked = None
          try:
              pid = os.fork()
              if pid == 0:
                  os._exit(0)
              os.waitpid(pid, 0)
              forked = "forked"
          except OSError as failure:
              forked = failure.errno
          stop.set()
          return {"started": started, "error": error, "fork": forked}
    `;
    const neighbour = execute(
      harness.client,
      header({}),
      jsonCall('import time\ndef f():\n    time.sleep(1)\n    return "fine"\n', 'f'),
    );
    const result = await execute(harness.client, header({}), jsonCall(bomb, 'bomb'));
    const out = envelopeOf(result).value as { started: number; error: string; fork: unknown };
    // The executor's own threads count too: fewer than the limit start.
    expect(out.started).to.be.within(PIDS_LIMIT - 10, PIDS_LIMIT - 1);
    expect(out.error).to.include("can't start new thread");
    expect(out.fork).to.equal(11); // EAGAIN
    expect(envelopeOf(await neighbour).value).to.equal('fine');
    const after = await execute(
      harness.client,
      header({}),
      jsonCall('def f():\n    return 1\n', 'f'),
    );
    expect(envelopeOf(after).value).to.equal(1);
  });

  it('cannot queue socket buffers beyond its memory budget', async () => {
    const flood = py`
      import socket
      def flood(connections):
          server = socket.socket()
          server.bind(("127.0.0.1", 0))
          server.listen(connections)
          queued, held = 0, []
          chunk = b"x" * 65536
          for _ in range(connections):
              client = socket.socket()
              client.connect(server.getsockname())
              accepted, _ = server.accept()
              client.setblocking(False)
              held.append((client, accepted))
              while True:
                  try:
                      queued += client.send(chunk)
                  except BlockingIOError:
                      break
          return queued
    `;
    const budget = 128 * MiB;
    const result = await execute(
      harness.client,
      header({ memory: budget }),
      jsonCall(flood, 'flood', [100]),
    );
    const queued = envelopeOf(result).value as number;
    // Unbounded, 100 loopback connections queue about 370 MiB here (each has its own buffers).
    expect(queued).to.be.greaterThan(32 * MiB);
    expect(queued).to.be.lessThan(budget * 1.25);
    const hierarchies = findCgroupHierarchies(readFileSync('/proc/self/mountinfo', 'utf8'));
    if (hierarchies?.version === 1) {
      expect(queued).to.be.lessThan(budget * 1.1);
    }
  });

  it('cannot fill /tmp beyond its quota: ENOSPC at half its first call budget, not an OOM kill', async () => {
    const fill = py`
      import os
      def fill():
          stat = os.statvfs("/tmp")
          written, error = 0, None
          try:
              with open("/tmp/fill", "wb") as out:
                  block = b"z" * (1024 * 1024)
                  for _ in range(1024):
                      out.write(block)
                      out.flush()
                      written += len(block)
          except OSError as failure:
              error = failure.errno
          os.unlink("/tmp/fill")
          return {"size": stat.f_blocks * stat.f_frsize, "written": written, "error": error}
    `;
    const result = await execute(
      harness.client,
      header({ memory: 256 * MiB, ids: { sessionId: 'sess-fill' } }),
      jsonCall(fill, 'fill'),
    );
    const out = envelopeOf(result).value as { size: number; written: number; error: number };
    expect(out.size).to.equal(128 * MiB);
    expect(out.error).to.equal(28); // ENOSPC
    expect(out.written).to.be.within(120 * MiB, 128 * MiB);
    // The container lives on: it was refused, not killed.
    const again = await execute(
      harness.client,
      header({
        memory: 256 * MiB,
        ids: { sessionId: 'sess-fill', containerId: result.ids!.containerId },
      }),
      jsonCall('def f():\n    return 2\n', 'f'),
    );
    expect(envelopeOf(again).value).to.equal(2);
  });
});
