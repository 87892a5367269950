import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Config } from '../config.ts';
import { openBlobStore, type BlobStore } from '../documents/blob-store.ts';
import { RenderPool } from '../documents/render-pool.ts';
import { DocumentService } from '../services/documents.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** Where document bytes live (files beside SQLite, or PostgreSQL's blob tables): it holds nothing to close. */
    blobs: BlobStore;
    /** The render workers; closed before the database. */
    renderer: RenderPool;
    documents: DocumentService;
  }
}

/** The blob store, the render pool and the document service on top of them, after the database plugin. */
export const documentsPlugin = fp<{ config: Config; renderWorkers?: number }>(
  async (app: FastifyInstance, { config, renderWorkers }) => {
    app.decorate('blobs', await openBlobStore(app.database, config.dataDir));
    const renderer = new RenderPool(renderWorkers === undefined ? config.render : { ...config.render, workers: renderWorkers });
    app.decorate('renderer', renderer);
    app.addHook('onClose', async () => renderer.close());
    const documents = new DocumentService(app.database.db, app.blobs, renderer, { maxBytes: config.maxDocumentBytes, thumbnailWidth: config.thumbnailWidth });
    app.decorate('documents', documents);
    const recovered = await documents.recover();
    if (recovered.temporaryFiles + recovered.orphanBlobs > 0) app.log.info(recovered, 'removed what an interrupted upload left behind');
  },
  { name: 'documents', dependencies: ['database'] },
);
