import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Config } from '../config.ts';
import { openBlobStore, type BlobStore } from '../documents/blob-store.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** Where document bytes live: files under the data directory beside SQLite, or PostgreSQL's blob tables. */
    blobs: BlobStore;
  }
}

/**
 * Opens the blob store after the database (on PostgreSQL it is the database's blob tables). It
 * holds no handle between calls, so it has nothing to close: every write is staged, fsync'd and
 * committed within the call that makes it.
 */
export const blobStorePlugin = fp<{ config: Config }>(
  async (app: FastifyInstance, { config }) => {
    const blobs = await openBlobStore(app.database, config.dataDir);
    app.decorate('blobs', blobs);
    app.addHook('onClose', async () => blobs.close());
  },
  { name: 'blob-store', dependencies: ['database'] },
);
