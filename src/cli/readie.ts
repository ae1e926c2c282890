/** The `readie` command: the router, a worker, a whole local cluster, and pin changes. */
import { Command } from 'commander';
import { addPinCommand } from './pin-command.js';
import { addRouterCommand } from './router-command.js';
import { addUpCommand } from './up-command.js';
import { addWorkerCommand } from './worker-command.js';

const program = new Command('readie')
  .description('readie: run Python functions on remote workers, placed by an event-sourced router')
  .showHelpAfterError();

addUpCommand(program);

addRouterCommand(program);

addWorkerCommand(program);

addPinCommand(program);

await program.parseAsync(process.argv);
