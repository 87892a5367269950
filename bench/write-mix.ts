/**
 * The directory write mix of the write benchmarks: for each user in turn (ids `prefix<pid>-N`),
 * create, rename, add to the room `small`, suspend, through the REST API of the sample
 * organization `bench` (bench-directory.ts).
 */
import { BENCH_BASIC } from './bench-directory.ts';
import { send } from './http-client.ts';

export const API = '/admin/api/v3/organizations/bench';

/** One request; its latency in ms (throws on a status other than the expected). */
export async function timed(port: number, method: string, route: string, body: unknown, expected: number): Promise<number> {
  const at = performance.now();
  const response = await send(
    port,
    method,
    route,
    { authorization: BENCH_BASIC, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    body !== undefined ? JSON.stringify(body) : undefined,
  );
  if (response.status !== expected) throw new Error(`${method} ${route}: ${response.status} ${response.text}`);
  return performance.now() - at;
}

/** The k-th write of the mix; its latency in ms. */
export async function writeOnce(port: number, prefix: string, k: number): Promise<number> {
  const index = Math.floor(k / 4);
  const id = `${prefix}${process.pid}-${index}`;
  switch (k % 4) {
    case 0:
      return timed(port, 'POST', `${API}/users`, { id, firstname: 'Wanda', lastname: `Writer${index}`, email: `${id}@bench.example` }, 201);
    case 1:
      return timed(port, 'PATCH', `${API}/users/${id}`, { lastname: `Renamed${index}` }, 200);
    case 2:
      return timed(port, 'PUT', `${API}/rooms/small/members/${id}`, undefined, 204);
    default:
      return timed(port, 'PATCH', `${API}/users/${id}`, { status: 'suspended' }, 200);
  }
}

/** Runs the mix from `clients` clients for `forSeconds`: latencies and writes per second. */
export async function writeLoad(port: number, prefix: string, clients: number, forSeconds: number): Promise<{ latencies: number[]; perSecond: number }> {
  const latencies: number[] = [];
  const deadline = performance.now() + forSeconds * 1000;
  const began = performance.now();
  let users = 0;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      // Each client runs whole sequences of four, so each works on a user it created.
      while (performance.now() < deadline) {
        const user = users++;
        for (let kind = 0; kind < 4; kind++) latencies.push(await writeOnce(port, prefix, user * 4 + kind));
      }
    }),
  );
  return { latencies, perSecond: latencies.length / ((performance.now() - began) / 1000) };
}
