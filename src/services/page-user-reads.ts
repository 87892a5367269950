import type { Kysely } from 'kysely';
import type { Database } from '../db/tables.ts';
import { asAtVersion, findUsersWithChangesBySeq, type SignatoryRow, type UserWithChanges } from '../repositories/signatory-repository.ts';

/**
 * Reads of lookup pages' users by seq, outside a transaction, shared by the lookups computed at one
 * moment, for the users no earlier answer or change read holds (SignatoryLookup's #knownUsers): after a commit, every lookup kept is computed again at once (the organization's index
 * catches up, and they all go on in the same turn of the event loop), and one statement per
 * organization and room reads the users of all their pages, where each would read its own (on
 * PostgreSQL, a round trip each, 200 commits a second). Each lookup then takes its own users as
 * they were at its version, if none changed since (asAtVersion).
 */
export class PageUserReads {
  readonly #db: Kysely<Database>;
  /** Reads gathering seqs until the end of this turn of the event loop, by organization and room. */
  readonly #gathering = new Map<string, { seqs: Set<number>; users: Promise<Map<number, UserWithChanges>> }>();

  constructor(db: Kysely<Database>) {
    this.#db = db;
  }

  /** The users of the seqs, in their order, as they were at `version`; undefined when one of them changed since. */
  async read(orgId: string, roomId: string, seqs: readonly number[], version: number): Promise<SignatoryRow[] | undefined> {
    const key = `${orgId}\0${roomId}`;
    let read = this.#gathering.get(key);
    if (read === undefined) {
      const gathered = new Set<number>();
      const users = new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
        this.#gathering.delete(key);
        return findUsersWithChangesBySeq(this.#db, orgId, roomId, [...gathered]);
      });
      read = { seqs: gathered, users };
      this.#gathering.set(key, read);
    }
    for (const seq of seqs) read.seqs.add(seq);
    return asAtVersion(await read.users, seqs, version);
  }
}
