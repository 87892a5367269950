/**
 * In-memory search index updates under steady writes, in one process, without a server: the cost
 * of laying one change over an index of a million users (SearchIndex.withChanges), by how many
 * changes are laid over it already, and of pages computed from it.
 *
 *   npm run bench:index-updates -- [--users 1000000] [--writes 4000] [--rounds 3] [--held]
 *
 * The writes are those of bench/writes.ts, in turn for each new user: created, renamed, made a
 * member of a room (its keys unchanged), suspended; with --held, the first of the four renames a
 * user the index holds (imported), picked at random, instead of creating one, as renames and SCIM
 * updates of existing users do. Each is one update, as a server takes in one
 * commit of another. Every COMPACT_AFTER (1,000) changes a server merges them into the base
 * (search-indexes.ts, in steps): so here, at once, untimed. The baseline, measured in the same run, is the
 * same update with few changes laid over (the first quarter): an update whose cost grows with the
 * changes laid over pays for them again at each of the 200 commits a second of the writes bench.
 * Every 100 writes, a search for a common term (one user in twelve) is timed too, its filter
 * tested on each match.
 */
import { parseArgs } from 'node:util';
import { SearchIndex, SearchIndexBuilder, type ChangedUser, type IndexedUser } from '../src/domain/search-index.ts';
import { foldedKeys } from '../src/domain/fold.ts';
import { SORT_FIELDS, sortKeyOrder } from '../src/domain/signatory-rules.ts';
import { COMPACT_AFTER } from '../src/search-index/search-indexes.ts';

const { values } = parseArgs({
  options: {
    users: { type: 'string', default: '1000000' },
    writes: { type: 'string', default: '4000' },
    rounds: { type: 'string', default: '3' },
    held: { type: 'boolean', default: false },
  },
});
const users = Number(values.users);
const writes = Number(values.writes);
const rounds = Number(values.rounds);
// Each user's four writes lay one change over the index (the same user's): the quarters fill up by 4,000 writes.
if (!(writes >= 4 * COMPACT_AFTER)) throw new Error(`--writes: at least ${4 * COMPACT_AFTER}, so that changes are laid over up to a merge`);
const FIRST = ['Anna', 'Bernd', 'Chloé', 'Dariusz', 'Emma', 'Fatima', 'Günther', 'Hiro', 'Ines', 'Jonas', 'Kasia', 'Lars'];
const LAST = ['Müller', 'Schmidt', 'Kowalski', 'Nowak', 'Rossi', 'García', 'Martin', 'Bernard', 'Jansen', 'Smith', 'Novák', 'Öztürk'];

interface Person {
  seq: number;
  id: string;
  firstname: string;
  lastname: string;
  email: string;
}

function person(seq: number, k: number): Person {
  return { seq, id: `u${k}`, firstname: FIRST[(k * 7) % FIRST.length]!, lastname: `${LAST[(k * 13) % LAST.length]}${k % 997}`, email: `u${k}@bench.example` };
}

function change(p: Person, candidate = true): ChangedUser {
  const keys = foldedKeys(p);
  return {
    seq: p.seq,
    id: p.id,
    searchKey: keys.searchKey,
    sortKeys: { lastname: keys.lastnameKey, firstname: keys.firstnameKey, email: keys.emailKey },
    external: false,
    needsInvite: false,
    candidate,
  };
}

function build(): SearchIndex {
  const people = Array.from({ length: users }, (_, k) => person(k + 1, k));
  const builder = new SearchIndexBuilder(1, users);
  const PIECE = 10_000;
  for (let at = 0; at < users; at += PIECE) {
    builder.addUsers(
      people
        .slice(at, at + PIECE)
        .map((p): IndexedUser => ({ seq: p.seq, searchKey: foldedKeys(p).searchKey, external: false, needsInvite: false, candidate: true })),
    );
  }
  const keyed = people.map((p) => ({ seq: p.seq, id: p.id, ...foldedKeys(p) }));
  for (const field of SORT_FIELDS) {
    const order = sortKeyOrder(field).map((f) => `${f}Key` as const);
    const sorted = [...keyed].sort((a, b) => {
      for (const key of order) if (a[key] !== b[key]) return a[key] < b[key] ? -1 : 1;
      return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
    });
    for (let at = 0; at < users; at += PIECE)
      builder.addOrder(
        field,
        sorted.slice(at, at + PIECE).map((p) => p.seq),
      );
  }
  const parts = builder.parts();
  if (parts === undefined) throw new Error('the index parts do not add up');
  return new SearchIndex(parts);
}

/** Microseconds per update by quarter of the changes laid over (0-249, 250-499, …), per page, and per search. */
function round(start: SearchIndex): { quarters: number[]; page: number; search: number } {
  let index = start;
  let version = 1;
  let seq = users;
  const sums = [0, 0, 0, 0];
  const counts = [0, 0, 0, 0];
  let pageMicros = 0;
  let searchMicros = 0;
  let current: Person | undefined;
  for (let k = 0; k < writes; k++) {
    let changed: ChangedUser;
    let total = index.users;
    switch (k % 4) {
      case 0:
        if (values.held) {
          // A held user, numbered as build() numbered it.
          const k0 = Math.floor(Math.random() * users);
          current = person(k0 + 1, k0);
        } else {
          current = person(++seq, users + k);
          total += 1;
        }
        current.firstname = 'Wanda';
        current.lastname = `Writer${k}`;
        changed = change(current);
        break;
      case 1:
        current!.lastname = `Renamed${k}`;
        changed = change(current!);
        break;
      case 2:
        changed = change(current!);
        break;
      default:
        changed = change(current!, false);
    }
    const laidOver = index.changesLaidOver;
    let at = performance.now();
    const next = index.withChanges(++version, total, [changed]);
    const micros = (performance.now() - at) * 1000;
    if (next === undefined) throw new Error('the change could not be laid over');
    const quarter = Math.min(3, Math.floor((4 * laidOver) / COMPACT_AFTER));
    sums[quarter]! += micros;
    counts[quarter]! += 1;
    index = next.changesLaidOver >= COMPACT_AFTER ? next.compacted() : next;
    at = performance.now();
    index.pageWithoutTerms({ includeExternal: true, filter: {}, sortBy: 'lastname', direction: 'ASC', offset: 0, size: 20 });
    pageMicros += (performance.now() - at) * 1000;
    if (k % 100 === 99) {
      at = performance.now();
      index.search({
        terms: ['mul'],
        includeExternal: false,
        filter: { external: false },
        sortBy: 'lastname',
        direction: 'ASC',
        offset: 0,
        size: 20,
      });
      searchMicros += (performance.now() - at) * 1000;
    }
  }
  return { quarters: sums.map((sum, q) => sum / counts[q]!), page: pageMicros / writes, search: searchMicros / Math.floor(writes / 100) };
}

process.stderr.write(`building an index of ${users.toLocaleString('en')} users…\n`);
const index = build();
const results: { quarters: number[]; page: number; search: number }[] = [];
for (let r = 0; r < rounds; r++) results.push(round(index));
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const quarters = [0, 1, 2, 3].map((q) => median(results.map((result) => result.quarters[q]!)));
const lines = [
  `# search index updates, ${users.toLocaleString('en')} users, ${writes} writes × ${rounds} rounds${values.held ? ', renaming held users' : ''}, ${new Date().toISOString().slice(0, 16)}Z`,
  '',
  '| changes laid over | µs per update (median of rounds) | ratio to the first quarter |',
  '|---|---|---|',
  ...quarters.map(
    (micros, q) => `| ${(q * COMPACT_AFTER) / 4}–${((q + 1) * COMPACT_AFTER) / 4 - 1} | ${micros.toFixed(1)} | ${(micros / quarters[0]!).toFixed(2)} |`,
  ),
  '',
  `page of 20 without terms after each update: ${median(results.map((result) => result.page)).toFixed(1)} µs`,
  `search for a term one user in twelve holds, every 100 updates: ${(median(results.map((result) => result.search)) / 1000).toFixed(2)} ms`,
];
console.log(lines.join('\n'));
