import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Config } from '../config.ts';
import { RenderPool } from '../documents/render-pool.ts';
import { DocumentService } from '../services/documents.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** The render workers; closed before the database. */
    renderer: RenderPool;
    documents: DocumentService;
  }
}

/** The render pool, and the document service on top of it and the blob store; closes the render pool before the database. */
export const documentsPlugin = fp<{ config: Config; renderWorkers?: number }>(
  async (app: FastifyInstance, { config, renderWorkers }) => {
    const renderer = new RenderPool(renderWorkers === undefined ? config.render : { ...config.render, workers: renderWorkers }, {
      onEvent: (event) => app.log.warn(event, 'render process killed'),
    });
    app.decorate('renderer', renderer);
    app.addHook('onClose', async () => renderer.close());
    const documents = new DocumentService(app.database.db, app.blobs, renderer, { maxBytes: config.maxDocumentBytes, thumbnailWidth: config.thumbnailWidth });
    app.decorate('documents', documents);
    const recovered = await documents.recover();
    if (recovered.temporaryFiles + recovered.orphanBlobs > 0) app.log.info(recovered, 'removed what an interrupted upload left behind');
  },
  { name: 'documents', dependencies: ['database', 'blob-store'] },
);
