/**
 * The `readie` command: the router, a worker, a whole local cluster, the cluster's status, pin
 * changes and certificates.
 */
import { Command } from 'commander';
import { addCertsCommand } from './certs-command.js';
import { addPinCommand } from './pin-command.js';
import { addRouterCommand } from './router-command.js';
import { addUpCommand } from './up-command.js';
import { addStatusCommand } from './status/status-command.js';
import { addWorkerCommand } from './worker-command.js';
import { quietNodeWarnings } from './node-warnings.js';

quietNodeWarnings();

// Every file readie writes (the event log, process logs, worker state) is root's alone unless the
// code that writes it says otherwise; the children of `readie up` inherit this.
process.umask(0o077);

const program = new Command('readie')
  .description('readie: run Python functions on remote workers, placed by an event-sourced router')
  .showHelpAfterError();

addUpCommand(program);

addRouterCommand(program);

addWorkerCommand(program);

addStatusCommand(program);

addPinCommand(program);

addCertsCommand(program);

await program.parseAsync(process.argv);
