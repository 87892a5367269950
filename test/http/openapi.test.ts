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

  it('serves interactive docs at /docs', async () => {
    const response = await t.app.inject({ url: '/docs' });
    assert.equal(response.statusCode, 200);
    assert.match(response.body, /swagger/i);
  });
});
