import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseBasicAuthorization } from '../../src/domain/basic-auth.ts';

const encode = (text: string) => Buffer.from(text, 'utf8').toString('base64');

describe('parseBasicAuthorization', () => {
  it('splits at the first colon and decodes UTF-8', () => {
    assert.deepEqual(parseBasicAuthorization(`Basic ${encode('jürgen:pa:ss:wörd🔑')}`), {
      username: 'jürgen',
      password: 'pa:ss:wörd🔑',
    });
  });
  it('accepts any letter case of the scheme and an empty password', () => {
    assert.deepEqual(parseBasicAuthorization(`bAsIc ${encode('a:')}`), { username: 'a', password: '' });
  });
  it('rejects other schemes, junk base64, invalid UTF-8, missing colon or username', () => {
    for (const header of [
      'Bearer abc',
      'Basic',
      'Basic ',
      'Basic !!!!',
      'Basic YWJj ZGVm',
      'Basic YWJjOmRlZ', // one character past a whole group: not base64
      `Basic ${Buffer.from([0x61, 0x3a, 0xff, 0xfe]).toString('base64')}`,
      `Basic ${encode('no-colon')}`,
      `Basic ${encode(':password')}`,
    ]) {
      assert.equal(parseBasicAuthorization(header), undefined, header);
    }
  });
});
