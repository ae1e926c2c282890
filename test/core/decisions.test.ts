/**
 * The registry of decisions (`src/core/decisions.ts`) lists every decision of the core, and the
 * shells decide through it alone. Both are read from the code, with the TypeScript checker: a
 * decision is an exported function of `src/core` that returns a `Decision` (`cause` and
 * `events`), whatever it is named; a shell (the router, the call machine, replay, the CLI) that
 * names one directly bypasses the registry.
 */
import { expect } from 'chai';
import { readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';
import { DECISIONS } from '../../src/core/decisions.js';
import { ROOT } from '../support/replay.js';

/** Every `.ts` file under `dir` (relative to the repository). */
function sources(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.ts'))
    .map((file) => join(ROOT, dir, file));
}

/** A decision function as the checker sees it: where it is declared, and its name. */
interface Found {
  readonly file: string;
  readonly name: string;
  readonly declaration: ts.FunctionDeclaration;
}

/**
 * One program over the core and its shells. `noResolve` keeps it small (no node_modules, no
 * generated proto): a type from outside these folders is unknown, which a `Decision`'s two fields
 * (declared in the core) do not need.
 */
function program(): ts.Program {
  const files = ['src/core', 'src/router', 'src/cli', 'replay'].flatMap(sources);
  return ts.createProgram(files, {
    noEmit: true,
    noResolve: true,
    types: [],
    lib: ['lib.es2023.d.ts'],
    strict: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
  });
}

/** The exported functions of `src/core` that return a `Decision`, each once (`decide` aside). */
function decisionsInTheCore(checker: ts.TypeChecker, files: readonly ts.SourceFile[]): Found[] {
  const found = new Map<ts.Node, Found>();
  for (const file of files) {
    const path = relative(ROOT, file.fileName);
    // The registry's own `decide` returns what the decision it dispatches to returns.
    if (!path.startsWith('src/core/') || path === 'src/core/decisions.ts') continue;
    const module = checker.getSymbolAtLocation(file);
    if (!module) continue;
    for (const exported of checker.getExportsOfModule(module)) {
      const declaration = exported.valueDeclaration;
      if (!declaration || !ts.isFunctionDeclaration(declaration) || found.has(declaration))
        continue;
      const signature = checker.getSignatureFromDeclaration(declaration);
      if (!signature) continue;
      const returned = checker.getReturnTypeOfSignature(signature);
      if (!returned.getProperty('cause') || !returned.getProperty('events')) continue;
      found.set(declaration, {
        file: relative(ROOT, declaration.getSourceFile().fileName),
        name: exported.name,
        declaration,
      });
    }
  }
  return [...found.values()];
}

/** The declarations of the functions `DECISIONS` lists, as the checker resolves its entries. */
function registered(checker: ts.TypeChecker, files: readonly ts.SourceFile[]): Set<ts.Node> {
  const registry = files.find((file) => relative(ROOT, file.fileName) === 'src/core/decisions.ts');
  const listed = new Set<ts.Node>();
  const visit = (node: ts.Node): void => {
    if (ts.isPropertyAssignment(node) && ts.isIdentifier(node.initializer)) {
      let symbol = checker.getSymbolAtLocation(node.initializer);
      if (symbol && symbol.flags & ts.SymbolFlags.Alias) symbol = checker.getAliasedSymbol(symbol);
      if (symbol?.valueDeclaration) listed.add(symbol.valueDeclaration);
    }
    ts.forEachChild(node, visit);
  };
  if (registry) visit(registry);
  return listed;
}

/** Each place outside the registry where a shell names a decision function (`file: name`). */
function directUses(
  checker: ts.TypeChecker,
  files: readonly ts.SourceFile[],
  decisions: readonly Found[],
): string[] {
  const declarations = new Set<ts.Node>(decisions.map((found) => found.declaration));
  const names = new Set(decisions.map((found) => found.name));
  const uses = new Set<string>();
  for (const file of files) {
    const path = relative(ROOT, file.fileName);
    if (path === 'src/core/decisions.ts') continue;
    const visit = (node: ts.Node): void => {
      // A subsystem's index re-exporting a decision does not use it.
      if (ts.isExportDeclaration(node)) return;
      // Resolving every identifier is slow: an import (renamed or not) and the names are enough.
      if (
        ts.isIdentifier(node) &&
        !ts.isFunctionDeclaration(node.parent) &&
        (names.has(node.text) || ts.isImportSpecifier(node.parent))
      ) {
        let symbol = checker.getSymbolAtLocation(node);
        if (symbol && symbol.flags & ts.SymbolFlags.Alias)
          symbol = checker.getAliasedSymbol(symbol);
        const declaration = symbol?.valueDeclaration;
        if (declaration && declarations.has(declaration)) uses.add(`${path}: ${node.text}`);
      }
      ts.forEachChild(node, visit);
    };
    visit(file);
  }
  return [...uses];
}

describe('the registry of decisions', function () {
  // Parsing the core and its shells takes a few seconds on a loaded machine.
  this.timeout(60_000);
  let checker: ts.TypeChecker;
  let files: ts.SourceFile[];
  let decisions: Found[];

  before(() => {
    const built = program();
    checker = built.getTypeChecker();
    files = built.getSourceFiles().filter((file) => !file.isDeclarationFile);
    decisions = decisionsInTheCore(checker, files);
  });

  it('given the core, when its decisions are read from the code, then the registry lists each', () => {
    // The check must see the decisions there are: the call's, the reports', the pin changes'.
    expect(decisions.map((found) => found.name)).to.include.members([
      'decideCall',
      'decideStatusReport',
      'decideStage',
    ]);
    const listed = registered(checker, files);
    const missing = decisions
      .filter((found) => !listed.has(found.declaration))
      .map((found) => `${found.file}: ${found.name}`);
    expect(missing, 'decisions the registry does not list').to.deep.equal([]);
    expect(listed.size, 'entries of DECISIONS').to.equal(decisions.length);
    expect(Object.keys(DECISIONS)).to.have.length(decisions.length);
  });

  it('given the shells, when they decide, then they go through the registry', () => {
    expect(directUses(checker, files, decisions)).to.deep.equal([]);
  });
});
