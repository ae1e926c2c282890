/** The `readie` command: the router, a worker, or a whole local cluster. */
import { Command } from 'commander';
import { notYet } from './not-yet.js';
import { addRouterCommand } from './router-command.js';
import { addWorkerCommand } from './worker-command.js';

const program = new Command('readie')
  .description('readie: run Python functions on remote workers, placed by an event-sourced router')
  .showHelpAfterError();

program
  .command('up')
  .description('start a local cluster (router and workers on loopback) under .readie/')
  .action(() => notYet('readie up', 'the local cluster arrives with the clients issue'));

addRouterCommand(program);

addWorkerCommand(program);

await program.parseAsync(process.argv);
