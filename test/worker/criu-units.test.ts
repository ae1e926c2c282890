import {
  appendFileSync,
  chmodSync,
  existsSync,
  mkdirSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import {
  compareVersions,
  CriuImage,
  identityMismatch,
  imageDirName,
  INSTALLED_CRIU,
  locateCriu,
  tooOldReason,
  type ImageIdentity,
} from '../../src/worker/checkpoints/index.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

const IDENTITY: ImageIdentity = {
  criuVersion: '4.2.1',
  cpuModel: 'AuthenticAMD 25/17 AMD EPYC',
  cpuFlags: 'f'.repeat(64),
  kernel: '6.18.0',
  python: '/usr/bin/python3.11 6000000 1700000000000',
  executorDir: '/opt/readie/src/executor',
  modules: ['numpy'],
  setup: '',
};

/** A directory shaped like a dump: image files, and the seed's seed.json naming one source. */
function fakeDump(source: string): string {
  const dir = tempDir('rw-image-');
  writeFileSync(join(dir, 'core-1.img'), 'core');
  writeFileSync(join(dir, 'pages-1.img'), Buffer.alloc(8192, 7));
  const [size, mtimeNs] = [4, '1700000000000000000'];
  writeFileSync(source, 'abcd');
  utimesSync(source, 1_700_000_000, 1_700_000_000);
  writeFileSync(join(dir, 'seed.json'), JSON.stringify({ sources: [[source, size, mtimeNs]] }));
  return dir;
}

describe('CRIU units', () => {
  after(cleanTempDirs);

  describe('versions', () => {
    it('orders dotted versions numerically', () => {
      expect(compareVersions('4.1', '4.1.0')).to.equal(0);
      expect(compareVersions('3.17.1', '4.1')).to.equal(-1);
      expect(compareVersions('4.10', '4.9')).to.equal(1);
      expect(compareVersions('4.2.1', '4.2')).to.equal(1);
    });

    it('refuses a criu before 4.1 only on a kernel that maps [vvar_vclock], naming the fix', () => {
      const reason = tooOldReason('/usr/sbin/criu', '3.17.1', true);
      expect(reason).to.include('criu 3.17.1 (/usr/sbin/criu) is older than 4.1');
      expect(reason).to.include('checkpoint-restore/criu#2532');
      expect(reason).to.match(/install a working one with sudo \/\S+\/deploy\/install-criu\.sh/);
      expect(tooOldReason('/usr/sbin/criu', '3.17.1', false)).to.equal(null);
      expect(tooOldReason('/x/criu', '4.1', true)).to.equal(null);
      expect(tooOldReason('/x/criu', '4.2.1', true)).to.equal(null);
    });

    it('takes --criu as given and says when it is not an executable', async () => {
      const dir = tempDir('rw-locate-');
      const criu = join(dir, 'criu');
      expect(await locateCriu(criu, '')).to.deep.equal({
        problem: `--criu ${criu} is not an executable file`,
      });
      writeFileSync(criu, '#!/bin/sh\n');
      chmodSync(criu, 0o755);
      expect(await locateCriu(criu, '')).to.deep.equal({ path: criu, foundBy: '--criu' });
      // The installed prefix comes before PATH when it is there.
      expect(await locateCriu(null, dir)).to.deep.equal(
        existsSync(INSTALLED_CRIU)
          ? { path: INSTALLED_CRIU, foundBy: 'installed prefix' }
          : { path: criu, foundBy: 'PATH' },
      );
    });
  });

  describe('images', () => {
    it('names image directories safely and uniquely, whatever the checkpoint ID', () => {
      const names = [
        'ckpt-numpy',
        '../../etc',
        '.hidden',
        'a/b',
        'a_b',
        'v+1.building-x',
        'x'.repeat(300),
      ].map(imageDirName);
      for (const name of names) {
        expect(name).to.match(/^[A-Za-z0-9_-][A-Za-z0-9._-]*-[0-9a-f]{12}$/);
        expect(name.length).to.be.at.most(61);
      }
      expect(new Set(names).size).to.equal(names.length);
      expect(imageDirName('a/b')).to.not.equal(imageDirName('a_b'));
    });

    it('says what an image was built for when it differs from here', () => {
      expect(identityMismatch(IDENTITY, IDENTITY)).to.equal(null);
      expect(identityMismatch(IDENTITY, { ...IDENTITY, criuVersion: '4.3' })).to.include(
        'another CRIU version ("4.2.1", here "4.3")',
      );
      expect(
        identityMismatch(IDENTITY, { ...IDENTITY, cpuModel: 'GenuineIntel 6/85 Xeon' }),
      ).to.include('another CPU model');
      expect(identityMismatch(IDENTITY, { ...IDENTITY, modules: ['numpy', 'scipy'] })).to.include(
        'other modules',
      );
    });

    it('seals a dump read-only, reopens it for the same identity, and sees any later change', async () => {
      const source = join(tempDir('rw-source-'), 'module.py');
      const dir = fakeDump(source);
      const manifest = await CriuImage.seal(dir, 'c1', IDENTITY, { dumpMs: 5, importMs: 7 }, 'now');
      expect(manifest.files.map((file) => file.name)).to.deep.equal([
        'core-1.img',
        'pages-1.img',
        'seed.json',
      ]);
      expect(manifest.bytes).to.be.greaterThan(8192);
      const opened = await CriuImage.open(dir, IDENTITY);
      if (!(opened instanceof CriuImage)) throw new Error(opened.stale);
      expect(opened.changed()).to.equal(null);

      expect(await CriuImage.open(dir, { ...IDENTITY, kernel: '6.19.0' })).to.deep.include({
        missing: false,
      });
      chmodSync(join(dir, 'pages-1.img'), 0o600);
      appendFileSync(join(dir, 'pages-1.img'), 'x');
      expect(opened.changed()).to.equal('pages-1.img changed size (8192 -> 8193 bytes)');
      const reopened = await CriuImage.open(dir, IDENTITY);
      expect(reopened).to.deep.equal({
        stale: 'its file pages-1.img is corrupt (it does not hash as sealed)',
        missing: false,
      });
      // A file removed, then the whole directory replaced by something that is not one.
      rmSync(join(dir, 'core-1.img'), { force: true });
      expect(opened.changed()).to.equal('core-1.img is gone');
      rmSync(dir, { recursive: true, force: true });
      writeFileSync(dir, 'not a directory');
      expect(opened.changed()).to.equal('core-1.img cannot be read (ENOTDIR)');
    });

    it('an image is stale once a module file it had loaded changes, or when it has no manifest', async () => {
      const source = join(tempDir('rw-source-'), 'module.py');
      const dir = fakeDump(source);
      await CriuImage.seal(dir, 'c1', IDENTITY, { dumpMs: 0, importMs: 0 }, 'now');
      utimesSync(source, 1_700_000_001, 1_700_000_001);
      expect(await CriuImage.open(dir, IDENTITY)).to.deep.equal({
        stale: `the module file ${source} changed since the dump`,
        missing: false,
      });
      const empty = tempDir('rw-image-');
      mkdirSync(join(empty, 'x'));
      expect(await CriuImage.open(empty, IDENTITY)).to.deep.equal({
        stale: 'there is no image yet',
        missing: true,
      });
    });
  });
});
