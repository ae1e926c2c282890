/** The `replay` command: reproduce placement decisions offline from a recorded log. */
import { Command } from 'commander';
import { notYet } from '../src/cli/not-yet.js';

const program = new Command('replay')
  .description(
    'replay a readie event log (LMDB directory or JSONL file) offline: run, verify, explain',
  )
  .showHelpAfterError();

for (const [name, description] of [
  ['run', 'fold the log and decide every call'],
  ['verify', 'check that every recorded decision is reproduced'],
  ['explain', 'show the state and the full explanation of one call'],
  ['state', 'print the folded cluster state at a point'],
  ['export', 'export a range of an LMDB log as JSONL'],
  ['import', 'import a JSONL file into an LMDB log'],
  ['whatif', 'decide every call again under a changed config'],
] as const) {
  program
    .command(name)
    .description(description)
    .action(() => notYet(`replay ${name}`, 'the replay CLI arrives with the replay issue'));
}

await program.parseAsync(process.argv);
