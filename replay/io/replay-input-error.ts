/** Bad input to replay (a missing file, a bad option value): exit status 2, a message, no stack. */
export class ReplayInputError extends Error {
  override readonly name = 'ReplayInputError';
}
