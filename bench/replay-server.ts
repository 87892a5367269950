/**
 * The baseline: a bare node:http server that answers each URL with the exact
 * bytes signroom answered it with, so the benchmark shows what signroom's own
 * work (auth, query, serialization) costs on top of HTTP itself.
 *   node bench/replay-server.ts <responses.json> <port>
 */
import http from 'node:http';
import { readFileSync } from 'node:fs';

const [file, port] = process.argv.slice(2);
const recorded = JSON.parse(readFileSync(file!, 'utf8')) as Record<string, { contentType: string; body: string }>;
const responses = new Map(Object.entries(recorded).map(([url, r]) => [url, { contentType: r.contentType, body: Buffer.from(r.body, 'utf8') }]));

http
  .createServer((req, res) => {
    const response = responses.get(req.url ?? '');
    if (response === undefined) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': response.contentType, 'content-length': response.body.length });
    res.end(response.body);
  })
  .listen(Number(port), '127.0.0.1', () => console.log('ready'));
