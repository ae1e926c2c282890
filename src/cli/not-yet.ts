/** What a command that a later milestone builds says today. */
export function notYet(command: string, when: string): void {
  process.stdout.write(`${command}: not yet: ${when}.\n`);
}
