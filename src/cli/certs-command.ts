/**
 * `readie certs`: a private CA and the TLS certificates a cluster needs, with the right names,
 * made with openssl: the router's (named for the host workers and nginx dial), one per worker
 * (named for its `--advertise` host: the router checks it), nginx's (named for the host clients
 * dial). EC P-256 keys, every certificate good for serving and as a client certificate. A CA
 * already in the directory is reused, so certificates for a new worker join the same cluster.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';

/** What the command line asked for. */
interface CertsFlags {
  readonly out: string;
  readonly router?: string;
  readonly worker: string[];
  readonly nginx?: string;
  readonly days: string;
}

/** A certificate to make: its file name and the names it carries. */
interface Leaf {
  readonly file: string;
  readonly names: readonly string[];
}

/** A configuration error: one line, exit 2. */
class CertsError extends Error {
  override readonly name = 'CertsError';
}

/** `host1,host2` as a list of names (DNS names or IP addresses). */
export function namesOf(text: string, flag: string): string[] {
  const names = text
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '');
  if (names.length === 0) throw new CertsError(`${flag} needs at least one host name or address`);
  for (const name of names) {
    if (
      isIP(name) === 0 &&
      !/^(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$/.test(
        name,
      )
    ) {
      throw new CertsError(`${flag}: "${name}" is neither a host name nor an IP address`);
    }
  }
  return names;
}

/** The subjectAltName value for `names`: IP addresses as IP, the rest as DNS. */
export function subjectAltName(names: readonly string[]): string {
  return names.map((name) => (isIP(name) === 0 ? `DNS:${name}` : `IP:${name}`)).join(',');
}

/** The certificates the flags ask for. */
function leavesOf(flags: CertsFlags): Leaf[] {
  const leaves: Leaf[] = [];
  if (flags.router !== undefined)
    leaves.push({ file: 'router', names: namesOf(flags.router, '--router') });
  for (const spec of flags.worker) {
    const [id, hosts] = spec.split('=', 2);
    if (!id || hosts === undefined || !/^[A-Za-z0-9._-]{1,63}$/.test(id)) {
      throw new CertsError(
        `--worker ${spec}: expected ID=HOST[,HOST...] (e.g. w1=w1.example.internal)`,
      );
    }
    leaves.push({ file: `worker-${id}`, names: namesOf(hosts, `--worker ${id}`) });
  }
  if (flags.nginx !== undefined)
    leaves.push({ file: 'nginx', names: namesOf(flags.nginx, '--nginx') });
  if (leaves.length === 0) {
    throw new CertsError(
      'name at least one certificate to make: --router, --worker ID=HOST or --nginx',
    );
  }
  return leaves;
}

function openssl(args: readonly string[]): void {
  const run = spawnSync('openssl', args, { encoding: 'utf8' });
  if (run.error) {
    throw new CertsError(
      `cannot run openssl (${run.error.message}): install it (Debian: apt-get install openssl)`,
    );
  }
  if (run.status !== 0) {
    throw new Error(
      `openssl ${args[0] ?? ''} failed: ${run.stderr.trim().split('\n').at(-1) ?? ''}`,
    );
  }
}

const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];

/** Makes the CA unless the directory has one; returns whether it made it. */
function ensureCa(dir: string, days: number): boolean {
  const cert = join(dir, 'ca.pem');
  const key = join(dir, 'ca-key.pem');
  if (existsSync(cert) && existsSync(key)) return false;
  openssl([
    'req',
    '-x509',
    ...EC,
    '-keyout',
    key,
    '-out',
    cert,
    '-days',
    String(days),
    '-subj',
    '/CN=readie cluster CA',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  chmodSync(key, 0o600);
  return true;
}

/** Makes one certificate signed by the CA, carrying `names`. */
function makeLeaf(dir: string, leaf: Leaf, days: number): void {
  const key = join(dir, `${leaf.file}-key.pem`);
  const cert = join(dir, `${leaf.file}.pem`);
  const request = join(dir, `${leaf.file}.csr`);
  const extensions = join(dir, `${leaf.file}.ext`);
  writeFileSync(
    extensions,
    `basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n` +
      `extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=${subjectAltName(leaf.names)}\n`,
  );
  try {
    openssl([
      'req',
      '-new',
      ...EC,
      '-keyout',
      key,
      '-out',
      request,
      '-subj',
      `/CN=${leaf.names[0] ?? leaf.file}`,
    ]);
    chmodSync(key, 0o600);
    openssl([
      'x509',
      '-req',
      '-in',
      request,
      '-CA',
      join(dir, 'ca.pem'),
      '-CAkey',
      join(dir, 'ca-key.pem'),
      '-set_serial',
      `0x${Buffer.from(crypto.getRandomValues(new Uint8Array(16))).toString('hex')}`,
      '-days',
      String(days),
      '-sha256',
      '-extfile',
      extensions,
      '-out',
      cert,
    ]);
  } finally {
    rmSync(request, { force: true });
    rmSync(extensions, { force: true });
  }
}

function runCerts(flags: CertsFlags): void {
  try {
    const days = Number(flags.days);
    if (!Number.isInteger(days) || days < 1)
      throw new CertsError(`--days ${flags.days}: expected a whole number of days`);
    const leaves = leavesOf(flags);
    const dir = resolve(flags.out);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const madeCa = ensureCa(dir, Math.max(days, 3650));
    process.stdout.write(
      `${madeCa ? 'made' : 'kept'} the CA: ${join(dir, 'ca.pem')} (its key ca-key.pem: keep it off the cluster)\n`,
    );
    for (const leaf of leaves) {
      makeLeaf(dir, leaf, days);
      process.stdout.write(
        `made ${join(dir, `${leaf.file}.pem`)} and ${leaf.file}-key.pem for ${leaf.names.join(', ')}\n`,
      );
    }
  } catch (error) {
    process.stderr.write(`readie certs: ${(error as Error).message}\n`);
    process.exit(error instanceof CertsError ? 2 : 1);
  }
}

/** Adds `readie certs` to `program`. */
export function addCertsCommand(program: Command): void {
  program
    .command('certs')
    .description(
      'make a private CA (or reuse the one in --out) and TLS certificates for the router, workers and nginx, named for the hosts that dial them (needs openssl)',
    )
    .requiredOption(
      '--out <dir>',
      'where to write ca.pem, <name>.pem and <name>-key.pem (keys 0600)',
    )
    .option(
      '--router <hosts>',
      "the router's host names or addresses, comma-separated: what workers and nginx dial",
    )
    .option(
      '--worker <id=hosts>',
      "a worker's ID and its --advertise host (the router checks that name), repeatable",
      (value: string, previous: string[]) => [...previous, value],
      [] as string[],
    )
    .option('--nginx <hosts>', 'the names clients dial (READIE_ADDRESS), comma-separated')
    .option('--days <n>', 'how long the certificates are valid', '825')
    .addHelpText(
      'after',
      "\nWrites ca.pem (trust it: the router's --worker-ca, the workers' --tls-ca, nginx's\n" +
        "grpc_ssl_trusted_certificate, the clients' READIE_CA_FILE), router.pem, worker-<id>.pem and\n" +
        'nginx.pem, each with its -key.pem. See docs/deploy.md.',
    )
    .action((flags: CertsFlags) => runCerts(flags));
}
