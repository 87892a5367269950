import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Config } from '../config.ts';
import { openMigratedDatabase, type DatabaseHandle } from '../db/database.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** The database, migrated; closed after everything registered later. */
    database: DatabaseHandle;
  }
}

/** Opens the database (SQLite or PostgreSQL, by the configuration), brings its schema up to date, and closes it last. */
export const databasePlugin = fp<{ config: Config }>(
  async (app: FastifyInstance, { config }) => {
    const { database } = await openMigratedDatabase(config);
    app.decorate('database', database);
    app.addHook('onClose', async () => database.close());
  },
  { name: 'database' },
);
