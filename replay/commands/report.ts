/** `replay report <log> <request-id> --html <file>`: a self-contained HTML incident report. */
import { writeFileSync } from 'node:fs';
import { reportHtml } from '../format/report-html.js';
import { openLogSource } from '../io/log-source.js';
import { ReplayInputError } from '../io/replay-input-error.js';
import { explainCall } from './explain-call.js';
import { parseOverrides } from './options.js';
import { reportData } from './report-data.js';

/** Options of `replay report`. */
export interface ReportOptions {
  readonly html?: string;
  readonly set?: readonly string[];
}

/** Runs `replay report`; resolves to the exit status. */
export async function reportCommand(
  logPath: string,
  requestId: string,
  options: ReportOptions,
): Promise<number> {
  if (options.html === undefined) throw new ReplayInputError('replay report needs --html <file>');
  const overrides = parseOverrides(options.set);
  const source = await openLogSource(logPath);
  let html: string;
  try {
    const explained = await explainCall(source, { requestId }, overrides);
    if (!explained)
      throw new ReplayInputError(`${logPath}: no CallRequested for request ${requestId}`);
    html = reportHtml(await reportData(source, logPath, explained));
  } finally {
    await source.close();
  }
  writeFileSync(options.html, html);
  process.stdout.write(`wrote ${options.html}\n`);
  return 0;
}
