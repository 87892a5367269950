import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Config } from '../config.ts';
import { removeOrphanedResults, serverSearchIndexes } from '../search-index/index.ts';
import type { SearchIndexes } from '../search-index/search-indexes.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** The in-memory search indexes of large organizations; closed before the database. */
    searchIndexes: SearchIndexes;
  }
}

/**
 * The in-memory search indexes. Copies kept on disk are taken before the server listens; those
 * read from the database load in the background, and until an organization's index is held, its
 * lookups are answered by the database.
 */
export const searchIndexesPlugin = fp<{ config: Config }>(
  async (app: FastifyInstance, { config }) => {
    const searchIndexes = serverSearchIndexes(config, app.database.db, app.log);
    app.decorate('searchIndexes', searchIndexes);
    app.addHook('onClose', async () => searchIndexes.close());
    app.addHook('onReady', async () => {
      await searchIndexes.preload();
      searchIndexes.watch(app.database.changes);
      removeOrphanedResults().then(
        (removed) => removed > 0 && app.log.info({ removed }, 'search index: removed result files left by servers that stopped mid-load'),
        (error: unknown) => app.log.warn({ err: error }, 'search index: could not remove result files left by stopped servers'),
      );
    });
  },
  { name: 'search-indexes', dependencies: ['database'] },
);
