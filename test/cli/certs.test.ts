import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { X509Certificate } from 'node:crypto';
import { join } from 'node:path';
import { namesOf, subjectAltName } from '../../src/cli/certs-command.js';
import { runReadie } from '../support/processes.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

async function certs(args: readonly string[]): Promise<{ code: number | null; stderr: string }> {
  const child = runReadie(['certs', ...args]);
  const { code } = await child.exited;
  return { code, stderr: child.stderr() };
}

describe('readie certs', function () {
  this.timeout(60_000);
  afterEach(cleanTempDirs);

  it('names hosts as DNS names and addresses as IP addresses', () => {
    expect(subjectAltName(namesOf('router.example.internal, 10.0.0.5,::1', '--router'))).to.equal(
      'DNS:router.example.internal,IP:10.0.0.5,IP:::1',
    );
    expect(() => namesOf('bad host', '--nginx')).to.throw(/--nginx: "bad host" is neither/);
    expect(() => namesOf(' , ', '--router')).to.throw(/at least one/);
  });

  it('makes certificates with the right names, keys 0600, and reuses its CA for a later worker', async () => {
    const dir = tempDir();
    const first = await certs([
      '--out',
      dir,
      '--router',
      'r.example.internal',
      '--worker',
      'w1=10.1.2.3',
      '--nginx',
      'readie.example.com',
    ]);
    expect(first.code, first.stderr).to.equal(0);
    const cert = (name: string) => new X509Certificate(readFileSync(join(dir, `${name}.pem`)));
    expect(cert('router').subjectAltName).to.equal('DNS:r.example.internal');
    expect(cert('worker-w1').subjectAltName).to.equal('IP Address:10.1.2.3');
    expect(cert('nginx').checkHost('readie.example.com')).to.equal('readie.example.com');
    for (const key of ['ca-key', 'router-key', 'worker-w1-key', 'nginx-key']) {
      expect(statSync(join(dir, `${key}.pem`)).mode & 0o777, key).to.equal(0o600);
    }
    const ca = readFileSync(join(dir, 'ca.pem'));
    const later = await certs(['--out', dir, '--worker', 'w2=w2.example.internal']);
    expect(later.code, later.stderr).to.equal(0);
    expect(readFileSync(join(dir, 'ca.pem')).equals(ca), 'the CA is kept').to.equal(true);
    const verify = spawnSync(
      'openssl',
      [
        'verify',
        '-CAfile',
        join(dir, 'ca.pem'),
        join(dir, 'worker-w2.pem'),
        join(dir, 'router.pem'),
      ],
      { encoding: 'utf8' },
    );
    expect(verify.status, verify.stdout + verify.stderr).to.equal(0);
  });

  it('refuses a malformed --worker, or nothing to make, in one line with exit 2', async () => {
    const dir = tempDir();
    const bad = await certs(['--out', dir, '--worker', 'w1']);
    expect(bad.code).to.equal(2);
    expect(bad.stderr).to.match(/^readie certs: --worker w1: expected ID=HOST\[,HOST\.\.\.\]/);
    const nothing = await certs(['--out', dir]);
    expect(nothing.code).to.equal(2);
    expect(nothing.stderr).to.match(/name at least one certificate/);
  });
});
