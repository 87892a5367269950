import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { issueSentence, parameterErrors, patternSentence, type ValidationIssue } from '../../src/http/validation-messages.ts';
import { EMAIL_PATTERN, ID_PATTERN } from '../../src/domain/directory-entities.ts';

const issue = (keyword: string, params: Record<string, unknown>, instancePath = '/name'): ValidationIssue => ({ keyword, instancePath, params });

describe('validation messages', () => {
  it('says what each pattern asks for in words, never as a regular expression', () => {
    assert.equal(patternSentence(ID_PATTERN.source), 'must be 1 to 64 letters, digits, ".", "_" or "-"');
    assert.equal(patternSentence(EMAIL_PATTERN.source), 'must be an email address (name@domain, without spaces)');
    assert.equal(patternSentence('^[\\x21-\\x7E]+$'), 'must be printable ASCII characters, without spaces');
    assert.equal(patternSentence('^x{3}$'), 'is not in the expected form');
  });

  it('turns each keyword into a sentence', () => {
    assert.equal(issueSentence(issue('minLength', { limit: 1 })), 'must not be empty');
    assert.equal(issueSentence(issue('minLength', { limit: 3 })), 'must be at least 3 characters long');
    assert.equal(issueSentence(issue('maxLength', { limit: 255 })), 'must be at most 255 characters long');
    assert.equal(issueSentence(issue('type', { type: 'boolean' })), 'must be true or false');
    assert.equal(issueSentence(issue('type', { type: 'string' })), 'must be a string');
    assert.equal(issueSentence(issue('enum', { allowedValues: ['active', 'pending'] })), 'must be one of "active", "pending"');
    assert.equal(issueSentence(issue('additionalProperties', { additionalProperty: 'zzz' })), 'is not a field this request takes');
    assert.equal(issueSentence(issue('required', { missingProperty: 'email' })), 'is required');
  });

  it('names fields by their dotted path, and a missing or unknown member by itself', () => {
    assert.deepEqual(
      parameterErrors([issue('required', { missingProperty: 'email' }, ''), issue('type', { type: 'boolean' }, '/settings/externalSignatories')], 'body'),
      [
        { parameter: 'email', message: 'is required' },
        { parameter: 'settings.externalSignatories', message: 'must be true or false' },
      ],
    );
  });

  it('reports why a nullable value is wrong, without "must be null" and "must match a schema in anyOf" beside it', () => {
    const issues = [issue('maxLength', { limit: 255 }, '/firstname'), issue('type', { type: 'null' }, '/firstname'), issue('anyOf', {}, '/firstname')];
    assert.deepEqual(parameterErrors(issues, 'body'), [{ parameter: 'firstname', message: 'must be at most 255 characters long' }]);
  });
});
