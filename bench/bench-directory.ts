/**
 * What the lookup, write and SCIM benchmarks share: the sample organization they import (its rooms
 * of 5,000 and 100,000 members), its credential, the page-20 lookup mix they drive, and how they
 * sum up latencies.
 */
import { writeFileSync } from 'node:fs';
import { sampleOrganization } from '../src/demo/sample-directory.ts';

/** The sample organization "bench" of `users` users, written as an import file with the credential bench / bench-password. */
export function writeBenchDirectory(file: string, users: number): { users: { id: string; email: string; lastname: string | null }[] } {
  const organization = sampleOrganization({
    orgId: 'bench',
    users,
    externalShare: 0.05,
    pendingShare: 0.15,
    rooms: [
      { id: 'small', members: Math.min(5_000, Math.floor(users / 20)) },
      { id: 'large', members: Math.min(100_000, Math.floor(users / 10)) },
    ],
    externalSignatories: true,
    seed: 7,
  });
  writeFileSync(
    file,
    JSON.stringify({ organizations: [organization], credentials: [{ username: 'bench', password: 'bench-password', organizations: ['bench'] }] }),
  );
  return organization as { users: { id: string; email: string; lastname: string | null }[] };
}

export const BENCH_BASIC = `Basic ${Buffer.from('bench:bench-password').toString('base64')}`;

/** The page-20 lookup mix under `base` (…/organizations/bench/rooms): no query, members, non-members, terms common, double and rare, a deep page, each sort. */
export function lookupMix(base: string): string[] {
  return [
    `${base}/small/signatories/lookup?size=20`,
    `${base}/large/signatories/lookup?size=20&sortBy=firstname&sortDirection=DESC`,
    `${base}/small/signatories/lookup?size=20&searchQuery=mul`,
    `${base}/small/signatories/lookup?size=20&searchQuery=ann%20sch`,
    `${base}/small/signatories/lookup?size=20&searchQuery=kowalski.4242`,
    `${base}/large/signatories/lookup?size=20&purpose=SIGNING_REQUEST_SIGNATORY`,
    `${base}/small/signatories/lookup?size=20&purpose=PERMISSION_INVITATION&sortBy=email`,
    `${base}/small/signatories/lookup?size=20&page=50&sortBy=email&sortDirection=desc`,
    `${base}/large/signatories/lookup?size=20&requiresInvitation=true`,
  ];
}

/** Count, median, 99th percentile and maximum of latencies in ms. */
export function latencySummary(latencies: readonly number[]): { n: number; p50: number; p99: number; max: number } {
  const sorted = [...latencies].sort((a, b) => a - b);
  const percentile = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
  return { n: sorted.length, p50: percentile(50), p99: percentile(99), max: sorted.at(-1) ?? 0 };
}
