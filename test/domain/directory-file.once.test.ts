import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { validateDirectoryFile } from '../../src/domain/directory-file.ts';

const org = (id: string) => ({ id, name: `Org ${id}`, users: [], rooms: [] });
const credential = (username: string) => ({ username, password: 'a-long-password', organizations: '*' });

describe('validateDirectoryFile', () => {
  it('keeps the first of two organizations with one id and names where the first is', () => {
    const { file, problems } = validateDirectoryFile({ organizations: [org('acme'), org('beta'), org('acme')] });
    assert.deepEqual(
      file.organizations.map((organization) => organization.id),
      ['acme', 'beta'],
    );
    assert.deepEqual(problems, [{ path: '$.organizations[2].id', message: 'duplicate organization id "acme" (also at $.organizations[0])' }]);
  });

  it('keeps the first of two credentials with one username and names where the first is', () => {
    const { file, problems } = validateDirectoryFile({ organizations: [], credentials: [credential('root'), credential('root'), credential('ops')] });
    assert.deepEqual(
      file.credentials.map((entry) => entry.username),
      ['root', 'ops'],
    );
    assert.deepEqual(problems, [{ path: '$.credentials[1].username', message: 'duplicate username "root" (also at $.credentials[0])' }]);
  });

  it('reports every problem at once: a bad field of the first entry and the duplicate after it', () => {
    const { problems } = validateDirectoryFile({ organizations: [{ id: 'acme', name: 42 }, org('acme')] });
    assert.deepEqual(
      problems.map((problem) => problem.path),
      ['$.organizations[0].name', '$.organizations[1].id'],
    );
  });
});
