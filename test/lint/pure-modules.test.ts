/**
 * The purity lint goes by folder (lint/pure-modules.cjs): a module that lands in a pure folder is
 * checked without being listed, by eslint and by dependency-cruiser alike.
 */
import { createRequire } from 'node:module';
import { expect } from 'chai';
import { ESLint, Linter } from 'eslint';
import tseslint from 'typescript-eslint';

const require = createRequire(import.meta.url);
const { isPureModule } = require('../../lint/pure-modules.cjs') as {
  isPureModule: (path: string) => boolean;
};
const depcruise = require('../../.dependency-cruiser.cjs') as {
  forbidden: { name: string; from: { path: string[]; pathNot: string[] } }[];
};

/** A module that does not exist yet, in the worker's core and in its shell. */
const NEW_CORE_MODULE = 'src/worker/core/containers/a-new-policy.ts';
const NEW_SHELL_MODULE = 'src/worker/containers/a-new-part.ts';

type Rules = Partial<Linter.RulesRecord>;

/** The rules eslint's config applies to `path`, restricted to the purity rules. */
async function purityRulesFor(path: string): Promise<Rules> {
  const config = (await new ESLint().calculateConfigForFile(path)) as { rules: Rules };
  return Object.fromEntries(
    Object.entries(config.rules).filter(([name]) => name.startsWith('no-restricted-')),
  );
}

/** What the purity rules say of `code` (type information is not needed for them). */
function complaints(rules: Rules, code: string): string[] {
  return new Linter()
    .verify(
      code,
      [{ files: ['**/*.ts'], languageOptions: { parser: tseslint.parser }, rules }],
      'module.ts',
    )
    .map((message) => `${message.ruleId ?? 'parse'}: ${message.message}`);
}

describe('lint: pure modules are chosen by folder', function () {
  this.timeout(60_000);

  it('a new module in src/worker/core is pure; the worker shell and the events index are not', () => {
    expect(isPureModule(NEW_CORE_MODULE)).to.equal(true);
    expect(isPureModule('src/core/placement/a-new-step.ts')).to.equal(true);
    expect(isPureModule('src/events/schema.ts')).to.equal(true);
    expect(isPureModule(NEW_SHELL_MODULE)).to.equal(false);
    expect(isPureModule('src/events/index.ts')).to.equal(false);
    expect(isPureModule('src/events/lmdb/event-log.ts')).to.equal(false);
    expect(isPureModule('src/router/router.ts')).to.equal(false);
  });

  it("dependency-cruiser's purity rules take the same folders", () => {
    const rule = depcruise.forbidden.find((entry) => entry.name === 'pure-imports-io');
    const matches = (patterns: string[], path: string) =>
      patterns.some((pattern) => new RegExp(pattern).test(path));
    const pure = (path: string) =>
      matches(rule!.from.path, path) && !matches(rule!.from.pathNot, path);
    expect(pure(NEW_CORE_MODULE)).to.equal(true);
    expect(pure(NEW_SHELL_MODULE)).to.equal(false);
    expect(pure('src/events/index.ts')).to.equal(false);
  });

  it('eslint refuses the clock, randomness and node:crypto beyond createHash in a new core module', async () => {
    const rules = await purityRulesFor(NEW_CORE_MODULE);
    expect(complaints(rules, 'export const now = (): number => Date.now();\n')).to.have.length(1);
    expect(complaints(rules, 'export let lastSeen = 0;\n')).to.have.length(1);
    expect(
      complaints(
        rules,
        "import { randomBytes } from 'node:crypto';\nexport const r = randomBytes;\n",
      )[0],
    ).to.match(/^no-restricted-imports: .*createHash/);
    expect(
      complaints(rules, 'export const id = (): string => crypto.randomUUID();\n'),
    ).to.have.length(1);
    expect(
      complaints(rules, "export const c = (): unknown => import('node:crypto');\n"),
    ).to.have.length(1);
    expect(
      complaints(
        rules,
        "import { createHash } from 'node:crypto';\nimport type { X509Certificate } from 'node:crypto';\n" +
          "export const h = (x: string, _c?: X509Certificate): string => createHash('sha256').update(x).digest('hex');\n",
      ),
    ).to.deep.equal([]);
  });

  it('eslint leaves the same code alone in the worker shell', async () => {
    const rules = await purityRulesFor(NEW_SHELL_MODULE);
    const code =
      "import { randomBytes } from 'node:crypto';\nexport const at = (): number => Date.now() + randomBytes(1).length;\n";
    expect(complaints(rules, code)).to.deep.equal([]);
  });
});
