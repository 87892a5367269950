import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';

describe('OpenAPI document and docs', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(async () => t.close());

  it('describes the lookup with every parameter and response', async () => {
    const response = await t.app.inject({ url: '/admin/api/v3/openapi.json' });
    assert.equal(response.statusCode, 200);
    const doc = response.json();
    assert.equal(doc.openapi, '3.1.0');
    assert.deepEqual(doc.components.securitySchemes.basicAuth, { type: 'http', scheme: 'basic' });
    const operation = doc.paths['/admin/api/v3/organizations/{organizationId}/rooms/{signingRoomId}/signatories/lookup'].get;
    const names = operation.parameters.map((p: { name: string; in: string }) => `${p.in}:${p.name}`).sort();
    assert.deepEqual(names, [
      'path:organizationId',
      'path:signingRoomId',
      'query:page',
      'query:purpose',
      'query:requiresInvitation',
      'query:roomMember',
      'query:searchQuery',
      'query:size',
      'query:sortBy',
      'query:sortDirection',
    ]);
    assert.deepEqual(Object.keys(operation.responses).sort(), ['200', '400', '401', '403', '404', '429']);
    assert.ok(operation.responses['400'].content['application/problem+json'].schema.properties.errors);
    const page = operation.responses['200'].content['application/json'].schema;
    assert.deepEqual(Object.keys(page.properties).sort(), [
      'content', 'empty', 'first', 'last', 'number', 'numberOfElements', 'pageable', 'size', 'sort', 'totalElements', 'totalPages',
    ]);
  });

  it('describes the document routes, their bodies, headers and problems', async () => {
    const doc = (await t.app.inject({ url: '/admin/api/v3/openapi.json' })).json();
    const base = '/admin/api/v3/organizations/{organizationId}/rooms/{signingRoomId}/documents';
    const upload = doc.paths[base].post;
    assert.deepEqual(Object.keys(upload.requestBody.content), ['application/json']);
    assert.deepEqual(upload.requestBody.content['application/json'].schema.required, ['payload']);
    assert.ok(upload.parameters.some((p: { in: string; name: string }) => p.in === 'header' && p.name === 'idempotency-key'));
    assert.deepEqual(Object.keys(upload.responses).sort(), ['201', '400', '401', '403', '404', '413', '415', '422', '429']);
    assert.deepEqual(Object.keys(upload.responses['201'].content['application/json'].schema.properties).sort(), ['id', 'thumbnail']);
    assert.ok(doc.paths[base].get);
    assert.ok(doc.paths[`${base}/{documentId}`].get);
    assert.ok(doc.paths[`${base}/{documentId}`].delete);
    assert.ok(doc.paths[`${base}/{documentId}/content`].get.responses['304']);
    assert.ok(doc.paths[`${base}/{documentId}/thumbnail`].get.responses['200'].content['image/png']);
  });

  it('serves interactive docs at /docs', async () => {
    const response = await t.app.inject({ url: '/docs' });
    assert.equal(response.statusCode, 200);
    assert.match(response.body, /swagger/i);
  });
});
