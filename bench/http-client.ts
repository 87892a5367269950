/**
 * The HTTP client of the write and SCIM benchmarks' writers: node:http over kept-alive
 * connections. Not fetch: on the two cores the servers, the database and wrk share, fetch
 * (undici) took 3.0 s of CPU to create 5,000 users over 10 s (500 a second, the SCIM goal's
 * rate), node:http 1.1-1.2 s; a real client runs elsewhere (docs/benchmarks.md).
 */
import http from 'node:http';

const agent = new http.Agent({ keepAlive: true });

/** One request to 127.0.0.1:`port`; its status and body as text. */
export function send(port: number, method: string, route: string, headers: Record<string, string>, body?: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const request = http.request({ host: '127.0.0.1', port, method, path: route, agent, headers }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      response.on('error', reject);
    });
    request.on('error', reject);
    request.end(body);
  });
}
