import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApiError, basicAuthorization } from '../../console/src/api.ts';
import { countText, messageFor } from '../../console/src/messages.ts';

const error = (status: number, code?: string, extra: Record<string, unknown> = {}, retryAfter?: number) =>
  new ApiError({ status, ...(code !== undefined ? { code } : {}), ...extra }, retryAfter);

describe('console messages', () => {
  it('turns every API error a person can meet into a sentence without JSON or a bare status', () => {
    const cases: [ApiError, Parameters<typeof messageFor>[1], RegExp][] = [
      [error(401, 'unauthorized'), 'sign-in', /^Wrong username or password\.$/],
      [error(401, 'unauthorized'), 'load', /no longer valid.*sign in again/],
      [error(403, 'forbidden'), 'load', /does not cover this organization/],
      [error(409, 'email-taken'), 'save', /^Another user already has this email address\.$/],
      [error(409, 'room-has-documents'), 'delete', /still holds documents/],
      [error(412, 'precondition-failed'), 'save', /Someone else changed this/],
      [error(413, 'payload-too-large'), 'upload', /^This file is too large to upload\.$/],
      [error(415, 'unsupported-media-type'), 'upload', /Upload a PDF, PNG or JPEG file\.$/],
      [error(422, 'document-encrypted'), 'upload', /protected by a password/],
      [error(422, 'document-unreadable', { detail: 'No PDF header found.' }), 'upload', /^This file cannot be opened as a document \(no PDF header found\)\.$/],
      [error(429, 'too-many-requests', {}, 30), 'sign-in', /Try again in 30 seconds\.$/],
      [error(429, 'too-many-requests', {}, 1), 'sign-in', /Try again in 1 second\.$/],
      [
        error(400, 'invalid-parameter', { errors: [{ parameter: 'email', message: 'must be an email address' }] }),
        'save',
        /^Please check: email: must be an email address\.$/,
      ],
      [error(0), 'load', /cannot be reached/],
      [error(500, 'internal-error', { detail: 'stack trace' }), 'load', /^The server had a problem/],
    ];
    for (const [apiError, task, expected] of cases) {
      const message = messageFor(apiError, task);
      assert.match(message, expected, `${apiError.status} ${apiError.problem.code ?? ''} while ${task}`);
      assert.doesNotMatch(message, /[{}]|\b(4|5)\d\d\b/);
    }
  });

  it('counts in digits, singular for one', () => {
    assert.equal(countText(1, 'signatory', 'signatories'), '1 signatory');
    assert.equal(countText(0, 'signatory', 'signatories'), '0 signatories');
    assert.equal(countText(1234567, 'signatory', 'signatories'), '1234567 signatories');
  });

  it('sends the credential as RFC 7617 Basic in UTF-8, a colon in the password included', () => {
    assert.equal(
      basicAuthorization({ username: 'acme-admin', password: 'pä:ss:wörd-🔑' }),
      `Basic ${Buffer.from('acme-admin:pä:ss:wörd-🔑', 'utf8').toString('base64')}`,
    );
  });
});
