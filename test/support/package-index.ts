/**
 * A package index (PEP 503 simple API) over HTTP on the host's loopback, serving the wheels of a
 * directory: where a worker's `--package-index` points in tests. Containers cannot reach it
 * (their network never reaches the host's loopback); the worker fetches from it.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';

/** A running index. */
export interface PackageIndex {
  /** The simple API's URL, e.g. http://127.0.0.1:4321/simple/ */
  readonly url: string;
  readonly port: number;
  /** The paths asked for, in order. */
  readonly requests: string[];
  close(): void;
}

/** The PEP 503 normal form of a project name. */
function normalize(name: string): string {
  return name.toLowerCase().replace(/[-_.]+/g, '-');
}

/** Serves the wheels in `dir` as an index on 127.0.0.1. */
export async function servePackageIndex(dir: string): Promise<PackageIndex> {
  const requests: string[] = [];
  const server: Server = createServer((request, response) => {
    const path = decodeURIComponent((request.url ?? '/').split('?')[0]!);
    requests.push(path);
    const wheels = readdirSync(dir).filter((file) => file.endsWith('.whl'));
    const project = /^\/simple\/([^/]+)\/?$/.exec(path)?.[1];
    if (project !== undefined) {
      const files = wheels.filter((file) => normalize(file.split('-')[0]!) === normalize(project));
      if (files.length === 0) {
        response.writeHead(404).end();
        return;
      }
      const links = files.map((file) => `<a href="/files/${file}">${file}</a>`).join('\n');
      response.writeHead(200, { 'content-type': 'text/html' });
      response.end(`<!DOCTYPE html><html><body>\n${links}\n</body></html>\n`);
      return;
    }
    const file = /^\/files\/([^/]+\.whl)$/.exec(path)?.[1];
    if (file !== undefined && wheels.includes(file)) {
      response.writeHead(200, { 'content-type': 'application/octet-stream' });
      response.end(readFileSync(join(dir, file)));
      return;
    }
    response.writeHead(404).end();
  });
  const port = await new Promise<number>((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)),
  );
  return {
    url: `http://127.0.0.1:${port}/simple/`,
    port,
    requests,
    close: () => server.close(),
  };
}
