/**
 * The HTML incident report of one call (`replay report --html`): one file that opens from disk
 * with no server and no network, holding the charting library (Observable Plot and d3), the
 * timeline both it and the dashboard draw, its data as JSON, and the script that lays it out.
 * Every tenant string is in the JSON and reaches the page as text only (report.js never writes
 * HTML); `<` is escaped in the JSON and the scripts, so nothing in them can close their element.
 */
import { libraryFile, pageFile } from '../../src/ui/assets.js';
import type { ReportData } from '../commands/report-data.js';

/** `text` safe inside a `<script>` element: no `</script`, no `<!--`. */
function scriptBody(text: string): string {
  return text.replace(/<\/(script)/gi, '<\\/$1').replace(/<!--/g, '<\\!--');
}

/** The report page. */
export function reportHtml(data: ReportData): string {
  const json = JSON.stringify(data).replace(/</g, '\\u003c');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<title>readie incident report</title>
<style>${pageFile('style.css')}</style>
</head>
<body>
<header><h1>readie incident report</h1><span id="report-title"></span></header>
<main id="report"></main>
<script>${scriptBody(libraryFile('d3.min.js'))}</script>
<script>${scriptBody(libraryFile('plot.umd.min.js'))}</script>
<script>${scriptBody(pageFile('timeline.js'))}</script>
<script type="application/json" id="report-data">${json}</script>
<script>${scriptBody(pageFile('report.js'))}</script>
</body>
</html>
`;
}
