/**
 * The HTTP client of the write and SCIM benchmarks' writers: node:http over kept-alive
 * connections. Not fetch: on the two cores the servers, the database and wrk share, fetch
 * (undici) took about a quarter of a core for 500 writes a second, three times what node:http
 * takes (docs/benchmarks.md, "A lighter write client"), and a real client runs elsewhere.
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
