/**
 * The `readie` command: the router, a worker, a whole local cluster, the cluster's status, pin
 * and quota changes and certificates.
 */
import { Command } from 'commander';
import { quietNodeWarnings } from './node-warnings.js';

quietNodeWarnings();

// Every file readie writes (the event log, process logs, worker state) is root's alone unless the
// code that writes it says otherwise; the children of `readie up` inherit this.
process.umask(0o077);

/** Adds one command to the program. */
type AddCommand = (program: Command) => void;

/**
 * Each command, in the order `readie --help` lists them, loaded only when it runs: the router's
 * and the worker's modules take seconds to load, which `readie status` and `readie pin` need not
 * wait for.
 */
const COMMANDS: Readonly<Record<string, () => Promise<AddCommand>>> = {
  up: async () => (await import('./up-command.js')).addUpCommand,
  router: async () => (await import('./router-command.js')).addRouterCommand,
  worker: async () => (await import('./worker-command.js')).addWorkerCommand,
  status: async () => (await import('./status/status-command.js')).addStatusCommand,
  pin: async () => (await import('./pin-command.js')).addPinCommand,
  quota: async () => (await import('./quota-command.js')).addQuotaCommand,
  images: async () => (await import('./image-command.js')).addImageCommands,
  image: async () => (await import('./image-command.js')).addImageCommands,
  calls: async () => (await import('./calls/calls-command.js')).addCallsCommands,
  call: async () => (await import('./calls/calls-command.js')).addCallsCommands,
  logs: async () => (await import('./calls/calls-command.js')).addCallsCommands,
  ui: async () => (await import('./ui/ui-command.js')).addUiCommand,
  certs: async () => (await import('./certs-command.js')).addCertsCommand,
};

const program = new Command('readie')
  .description('readie: run Python functions on remote workers, placed by an event-sourced router')
  .showHelpAfterError();

// The command named on the command line alone; every one for `readie --help` or a typo.
const named = process.argv[2];
const loading = named !== undefined && named in COMMANDS ? [named] : Object.keys(COMMANDS);
// One module may add several commands (calls, call, logs): each adder runs once.
const added = new Set<AddCommand>();
for (const name of loading) {
  const add = await COMMANDS[name]!();
  if (!added.has(add)) add(program);
  added.add(add);
}

await program.parseAsync(process.argv);
