import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { WWW_AUTHENTICATE } from '../../src/http/auth-hook.ts';
import { ACME_PASSWORD, DIRECTORY } from '../helpers/fixtures.ts';
import { solidImage } from '../helpers/images.ts';
import { basic, startTestApp, type TestApp } from '../helpers/test-app.ts';

interface HeaderObject {
  description?: string;
  schema: { type: string; enum?: string[]; pattern?: string; format?: string };
}
interface ResponseObject {
  description: string;
  headers?: Record<string, HeaderObject>;
  content?: Record<string, { schema: Record<string, unknown> }>;
}
interface Operation {
  parameters?: { in: string; name: string; required?: boolean }[];
  requestBody?: { content: Record<string, unknown> };
  responses: Record<string, ResponseObject>;
}

const DOCUMENTS = '/admin/api/v3/organizations/{organizationId}/rooms/{signingRoomId}/documents';

/** A schema as written where it is used, or the component its `$ref` names. */
function resolved(doc: { components: { schemas: Record<string, any> } }, schema: { $ref?: string } & Record<string, any>): Record<string, any> {
  if (schema.$ref === undefined) return schema;
  const name = decodeURIComponent(schema.$ref.replace('#/components/schemas/', ''));
  const component = doc.components.schemas[name];
  assert.ok(component, `${schema.$ref} is a component`);
  return component;
}
const API_ERRORS = ['401', '403', '429', '500', '503'];

describe('OpenAPI document and docs', () => {
  let t: TestApp;
  let doc: { paths: Record<string, Record<string, Operation>> } & Record<string, any>;
  before(async () => {
    t = await startTestApp();
    await t.importDirectory(DIRECTORY);
    doc = (await t.app.inject({ url: '/admin/api/v3/openapi.json' })).json();
  });
  after(async () => t.close());
  const operation = (path: string, method: string): Operation => {
    const found = doc.paths[path]?.[method];
    assert.ok(found, `${method.toUpperCase()} ${path} is described`);
    return found;
  };
  const statuses = (op: Operation) => Object.keys(op.responses).sort();

  it('names the server (contract section 7) and a license', () => {
    assert.deepEqual(
      doc['servers'].map((server: { url: string }) => server.url),
      ['/'],
    );
    assert.equal(doc['info'].license.identifier, 'Apache-2.0');
  });

  it('describes the directory routes with ETag, If-Match and every status their handlers send', () => {
    const user = '/admin/api/v3/organizations/{organizationId}/users/{userId}';
    assert.deepEqual(statuses(operation(user, 'patch')), ['200', '400', '401', '403', '404', '409', '412', '413', '415', '429', '500', '503']);
    assert.ok(
      operation(user, 'patch').parameters?.some((parameter: { name: string; in: string }) => parameter.name === 'if-match' && parameter.in === 'header'),
    );
    assert.ok(operation(user, 'get').responses['200']!.headers?.['ETag']);
    assert.ok(operation(user, 'get').responses['304']!.headers?.['ETag']);
    assert.ok(
      operation(user, 'get').parameters?.some((parameter: { name: string; in: string }) => parameter.name === 'if-none-match' && parameter.in === 'header'),
    );
    assert.ok(operation('/admin/api/v3/organizations/{organizationId}/users', 'post').responses['201']!.headers?.['Location']);
    assert.deepEqual(Object.keys(operation(user, 'patch').requestBody!.content).sort(), ['application/json', 'application/merge-patch+json']);
    const member = '/admin/api/v3/organizations/{organizationId}/rooms/{roomId}/members/{userId}';
    for (const method of ['put', 'delete']) {
      assert.ok(statuses(operation(member, method)).includes('412'), method);
      assert.ok(
        operation(member, method).parameters?.some((parameter: { name: string; in: string }) => parameter.name === 'if-match' && parameter.in === 'header'),
      );
    }
  });

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
    assert.deepEqual(Object.keys(operation.responses).sort(), ['200', '400', '401', '403', '404', '429', '500', '503']);
    assert.ok(resolved(doc, operation.responses['400'].content['application/problem+json'].schema).properties.errors);
    const page = resolved(doc, operation.responses['200'].content['application/json'].schema);
    assert.deepEqual(Object.keys(page.properties).sort(), [
      'content',
      'empty',
      'first',
      'last',
      'number',
      'numberOfElements',
      'pageable',
      'size',
      'sort',
      'totalElements',
      'totalPages',
    ]);
  });

  it('names its schemas as components, each written once, for client generators: User, Room, Problem, the pages', () => {
    for (const name of [
      'User',
      'UserPatch',
      'Room',
      'Organization',
      'Problem',
      'SignatoryPage',
      'UserPage',
      'AuditEvent',
      'DocumentMetadata',
      'DocumentUpload',
      'DocumentUploaded',
    ])
      assert.ok(doc['components'].schemas[name], name);
    const user = '/admin/api/v3/organizations/{organizationId}/users/{userId}';
    const created = operation('/admin/api/v3/organizations/{organizationId}/users', 'post').responses['201']!.content!['application/json']!.schema;
    assert.equal(created['$ref'], '#/components/schemas/User');
    assert.equal(created['description'], 'Created', "the place's own description beside the $ref");
    assert.ok(resolved(doc as never, created).properties.email);
    assert.equal(operation(user, 'patch').responses['404']!.content!['application/problem+json']!.schema['$ref'], '#/components/schemas/Problem');
    // A page's items are the component too.
    assert.equal(doc['components'].schemas['UserPage'].properties.content.items.$ref, '#/components/schemas/User');
    // No schema with a title is left written out in the paths.
    const titled: string[] = [];
    const walk = (node: unknown, at: string): void => {
      if (Array.isArray(node)) node.forEach((item, k) => walk(item, `${at}/${k}`));
      else if (typeof node === 'object' && node !== null)
        for (const [key, value] of Object.entries(node)) {
          if (key === 'title' && typeof value === 'string') titled.push(`${at}: ${value}`);
          else walk(value, `${at}/${key}`);
        }
    };
    walk(doc.paths, '');
    assert.deepEqual(titled, []);
  });

  it('describes the document routes, their bodies, headers and problems', async () => {
    const doc = (await t.app.inject({ url: '/admin/api/v3/openapi.json' })).json();
    const base = '/admin/api/v3/organizations/{organizationId}/rooms/{signingRoomId}/documents';
    const upload = doc.paths[base].post;
    assert.deepEqual(Object.keys(upload.requestBody.content), ['application/json']);
    assert.deepEqual(resolved(doc, upload.requestBody.content['application/json'].schema).required, ['payload']);
    assert.ok(upload.parameters.some((p: { in: string; name: string }) => p.in === 'header' && p.name === 'idempotency-key'));
    assert.deepEqual(Object.keys(upload.responses).sort(), ['201', '400', '401', '403', '404', '409', '413', '415', '422', '429', '500', '503']);
    assert.deepEqual(Object.keys(resolved(doc, upload.responses['201'].content['application/json'].schema).properties).sort(), ['id', 'thumbnail']);
    assert.ok(doc.paths[base].get);
    assert.ok(doc.paths[`${base}/{documentId}`].get);
    assert.ok(doc.paths[`${base}/{documentId}`].delete);
    assert.ok(doc.paths[`${base}/{documentId}/content`].get.responses['304']);
    assert.ok(doc.paths[`${base}/{documentId}/thumbnail`].get.responses['200'].content['image/png']);
  });

  it('declares the Location header of the upload', () => {
    const created = operation(DOCUMENTS, 'post').responses['201']!;
    assert.equal(created.headers?.['Location']?.schema.type, 'string');
    assert.match(String(created.headers?.['Location']?.description), /documents\/\{documentId\}/);
  });

  it('describes the content route: every media type, ETag, Cache-Control, If-None-Match and an empty 304', () => {
    const content = operation(`${DOCUMENTS}/{documentId}/content`, 'get');
    const ifNoneMatch = content.parameters?.find((p) => p.in === 'header' && p.name === 'if-none-match');
    assert.ok(ifNoneMatch, 'If-None-Match is a header parameter');
    assert.equal(ifNoneMatch.required, false);
    assert.deepEqual(statuses(content), ['200', '304', '401', '403', '404', '429', '500', '503']);
    const ok = content.responses['200']!;
    assert.deepEqual(Object.keys(ok.content ?? {}).sort(), ['application/pdf', 'image/jpeg', 'image/png']);
    assert.deepEqual(Object.keys(ok.headers ?? {}).sort(), ['Cache-Control', 'Content-Disposition', 'ETag']);
    const notModified = content.responses['304']!;
    assert.equal(notModified.content, undefined, 'a 304 has no body');
    assert.deepEqual(Object.keys(notModified.headers ?? {}).sort(), ['Cache-Control', 'ETag']);
  });

  it('describes the other document routes with the statuses their handlers send', () => {
    const item = `${DOCUMENTS}/{documentId}`;
    assert.deepEqual(statuses(operation(DOCUMENTS, 'get')), ['200', '400', '401', '403', '404', '429', '500', '503']);
    const metadata = operation(item, 'get');
    assert.deepEqual(statuses(metadata), ['200', '304', '401', '403', '404', '429', '500', '503']);
    assert.ok(metadata.responses['200']!.headers?.['ETag'] && metadata.responses['304']!.headers?.['ETag'], 'the metadata and its 304 carry an ETag');
    const thumbnail = operation(`${item}/thumbnail`, 'get');
    assert.deepEqual(statuses(thumbnail), ['200', '401', '403', '404', '429', '500', '503']);
    assert.deepEqual(Object.keys(thumbnail.responses['200']!.content ?? {}), ['image/png']);
    const remove = operation(item, 'delete');
    // A body sent with the DELETE anyway is parsed: not JSON is 415, malformed 400, too large 413.
    assert.deepEqual(statuses(remove), ['204', '400', '401', '403', '404', '413', '415', '429', '500', '503']);
    assert.equal(remove.responses['204']!.content, undefined, 'a 204 has no body');
  });

  it('lists 401, 403, 429, 500 and 503 problems with their headers on every /admin/api operation', () => {
    const operations = Object.entries(doc.paths)
      .filter(([path]) => path.startsWith('/admin/api/'))
      .flatMap(([path, methods]) => Object.entries(methods).map(([method, op]) => ({ name: `${method.toUpperCase()} ${path}`, op })));
    assert.equal(operations.length, 27, 'the lookup, six document operations and twenty directory operations');
    for (const { name, op } of operations) {
      for (const status of API_ERRORS) {
        assert.ok(op.responses[status], `${name} lists ${status}`);
      }
      assert.deepEqual(op.responses['401']!.headers?.['WWW-Authenticate']?.schema.enum, [WWW_AUTHENTICATE], name);
      assert.equal(op.responses['429']!.headers?.['Retry-After']?.schema.type, 'integer', name);
      assert.equal(op.responses['503']!.headers?.['Retry-After']?.schema.type, 'integer', name);
      assert.match(op.responses['500']!.description, /internal-error/, name);
      assert.match(op.responses['503']!.description, /service-unavailable/, name);
      for (const [status, response] of Object.entries(op.responses).filter(([status]) => Number(status) >= 400)) {
        assert.deepEqual(Object.keys(response.content ?? {}), ['application/problem+json'], `${name} ${status}`);
      }
    }
  });

  it('describes /readyz with its 503 problem, which carries no Retry-After', () => {
    const ready = operation('/readyz', 'get');
    assert.deepEqual(statuses(ready), ['200', '503']);
    assert.deepEqual(Object.keys(ready.responses['503']!.content ?? {}), ['application/problem+json']);
    assert.equal(ready.responses['503']!.headers, undefined);
    assert.deepEqual(statuses(operation('/livez', 'get')), ['200']);
  });

  it('declares the headers the document routes actually send', async () => {
    const auth = { authorization: basic('acme-admin', ACME_PASSWORD) };
    const url = '/admin/api/v3/organizations/acme/rooms/board/documents';
    const created = await t.app.inject({
      method: 'POST',
      url,
      headers: { ...auth, 'content-type': 'application/json' },
      payload: JSON.stringify({ payload: (await solidImage(40, 20, 'jpeg', 0)).toString('base64'), name: 'grey.jpg' }),
    });
    assert.equal(created.statusCode, 201, created.body);
    assert.equal(created.headers['location'], `${url}/${created.json().id}`);

    const declared = operation(`${DOCUMENTS}/{documentId}/content`, 'get').responses;
    const content = await t.app.inject({ url: `${url}/${created.json().id}/content`, headers: auth });
    assert.equal(content.statusCode, 200);
    assert.ok(Object.keys(declared['200']!.content ?? {}).includes(String(content.headers['content-type'])));
    for (const [name, header] of Object.entries(declared['200']!.headers ?? {})) {
      const sent = content.headers[name.toLowerCase()];
      assert.ok(sent !== undefined, `${name} is sent`);
      if (header.schema.pattern !== undefined) assert.match(String(sent), new RegExp(header.schema.pattern), name);
      if (header.schema.enum !== undefined) assert.ok(header.schema.enum.includes(String(sent)), name);
    }
    const notModified = await t.app.inject({
      url: `${url}/${created.json().id}/content`,
      headers: { ...auth, 'if-none-match': String(content.headers['etag']) },
    });
    assert.equal(notModified.statusCode, 304);
    assert.equal(notModified.rawPayload.length, 0);
    for (const name of Object.keys(declared['304']!.headers ?? {})) {
      assert.equal(notModified.headers[name.toLowerCase()], content.headers[name.toLowerCase()], name);
    }
    const unauthorized = await t.app.inject({ url: `${url}/${created.json().id}/content` });
    assert.equal(unauthorized.headers['www-authenticate'], WWW_AUTHENTICATE);
  });

  it('serves interactive docs at /docs', async () => {
    const response = await t.app.inject({ url: '/docs' });
    assert.equal(response.statusCode, 200);
    assert.match(response.body, /swagger/i);
  });
});
