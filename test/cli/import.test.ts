import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { cliWorkspace, runCli, runCliAtTerminal, type CliWorkspace } from '../helpers/cli.ts';
import { TEST_DIALECT } from '../helpers/databases.ts';
import { ACME, DIRECTORY } from '../helpers/fixtures.ts';
import { topHalfBlackPdf } from '../helpers/pdf.ts';
import { MAX_LAID_OVER } from '../../src/search-index/search-indexes.ts';

describe('bin/signroom import', () => {
  let workspace: CliWorkspace;
  let dataDir: string;
  const env = () => workspace.env;
  const write = (name: string, content: unknown) => {
    const file = path.join(dataDir, name);
    writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content));
    return file;
  };
  /** The directory as stored, to prove a refused import changed nothing. */
  const snapshot = async () => {
    const tables = [];
    for (const table of ['organizations', 'users', 'rooms', 'room_members', 'credentials']) {
      tables.push(await workspace.sql<Record<string, unknown>>(sql`SELECT * FROM ${sql.table(table)} ORDER BY 1, 2`));
    }
    return tables;
  };

  before(async () => {
    workspace = await cliWorkspace();
    dataDir = workspace.dataDir;
    const result = await runCli(['import', write('directory.json', DIRECTORY)], env());
    assert.equal(result.code, 0, result.stderr);
  });
  after(() => workspace.close());

  it('prints counts and is idempotent', async () => {
    const before = await snapshot();
    const result = await runCli(['import', path.join(dataDir, 'directory.json')], env());
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /imported 2 organization\(s\), 5 user\(s\), 3 room\(s\) with 2 member\(s\), 2 credential\(s\)/);
    const afterImport = await snapshot();
    // Only the password salts and the directory versions move (with the version a room's member list was last replaced in).
    const moving = new Set(['password_hash', 'updated_at', 'directory_version', 'members_changed_in']);
    const strip = (tables: unknown[][]) => JSON.stringify(tables, (key, value) => (moving.has(key) ? undefined : value));
    assert.equal(strip(afterImport), strip(before));
  });

  it('works from any directory with an old node first on PATH', async () => {
    const result = await runCli(['migrate'], { ...env(), PATH: `/usr/bin:/bin` }, { cwd: '/' });
    assert.equal(result.code, 0, result.stderr);
  });

  const refused: [string, unknown, RegExp[]][] = [
    ['invalid JSON', '{"organizations": [', [/^\$: not valid JSON/m]],
    ['a non-object file', '[1, 2]', [/^\$: the file must hold a JSON object/m]],
    [
      'duplicate emails ignoring case',
      { organizations: [{ ...ACME, users: [...ACME.users, { id: 'u9', email: 'ANNA@acme.example' }] }] },
      [
        /^\$\.organizations\[0\]\.users\[4\]\.email: duplicate email "ANNA@acme.example", ignoring case \(also at \$\.organizations\[0\]\.users\[0\]\.email\)$/m,
      ],
    ],
    [
      'unknown member ids',
      { organizations: [{ ...ACME, rooms: [{ id: 'r', name: 'R', members: ['u1', 'ghost', 'ghost2'] }] }] },
      [/^\$\.organizations\[0\]\.rooms\[0\]\.members\[1\]: unknown user id "ghost"/m, /members\[2\]: unknown user id "ghost2"/m],
    ],
    [
      'bad ids and wrong types',
      {
        organizations: [
          {
            id: 'bad id!',
            name: 5,
            settings: { externalSignatories: 'yes' },
            users: [{ id: 'x'.repeat(65), email: 'not-an-email', external: 'no', status: 'sleeping', firstname: 7 }],
            rooms: 'none',
          },
        ],
        credentials: [{ username: 'a:b', password: '', organizations: 'acme' }],
      },
      [
        /^\$\.organizations\[0\]\.id: organization id must be/m,
        /^\$\.organizations\[0\]\.name: must be a non-empty string/m,
        /^\$\.organizations\[0\]\.settings\.externalSignatories: must be true or false/m,
        /^\$\.organizations\[0\]\.users\[0\]\.id: user id must be/m,
        /^\$\.organizations\[0\]\.users\[0\]\.email: must be an email address/m,
        /^\$\.organizations\[0\]\.users\[0\]\.external: must be true or false/m,
        /^\$\.organizations\[0\]\.users\[0\]\.status: must be "active", "pending", "suspended"/m,
        /^\$\.organizations\[0\]\.users\[0\]\.firstname: must be a string/m,
        /^\$\.organizations\[0\]\.rooms: must be an array/m,
        /^\$\.credentials\[0\]\.username: must not contain ":"/m,
        /^\$\.credentials\[0\]\.password: must be a non-empty string/m,
        /^\$\.credentials\[0\]\.organizations: must be "\*" or an array/m,
      ],
    ],
    [
      'text that cannot be stored faithfully: unpaired surrogates, control characters, infinite numbers',
      // JSON.stringify writes lone surrogates as \\u escapes; 1e999 (Infinity to JSON.parse) is put in by hand.
      JSON.stringify({
        organizations: [
          {
            id: 'acme',
            name: 'Acme \ud800',
            users: [{ id: 'u1', email: 'anna@acme.example', external: 'INFINITY' }],
            rooms: [
              { id: 'r', name: 'R\udc00' },
              { id: 's', name: 'Tab\there' },
            ],
          },
        ],
        credentials: [{ username: 'ad\ud800min', password: 'pass\udfffword', organizations: '*' }],
      }).replace('"INFINITY"', '1e999'),
      [
        /^\$\.organizations\[0\]\.name: must not contain control characters or unpaired surrogates$/m,
        /^\$\.organizations\[0\]\.users\[0\]\.external: must be true or false, got number Infinity$/m,
        /^\$\.organizations\[0\]\.rooms\[0\]\.name: must not contain control characters or unpaired surrogates$/m,
        /^\$\.organizations\[0\]\.rooms\[1\]\.name: must not contain control characters/m,
        /^\$\.credentials\[0\]\.username: must not contain control characters or unpaired surrogates$/m,
        /^\$\.credentials\[0\]\.password: must not contain unpaired surrogates$/m,
      ],
    ],
    [
      'invalid JSON hidden behind a duplicate key',
      '{"organizations": [{"id": "acme", "users": [nonsense], "users": []}]}',
      [/^\$: not valid JSON: .* at byte 44$/m],
    ],
    [
      'problems in the file and against the database at once',
      {
        organizations: [
          {
            ...ACME,
            users: [...ACME.users, { id: 'u8', email: 'broken' }, { id: 'u9', firstname: 'Bad\u0007', email: 'bell@acme.example' }],
            rooms: [{ id: 'board', name: 'Board', members: ['u1', 'u8', 'nobody'] }],
          },
        ],
      },
      [
        /^\$\.organizations\[0\]\.users\[4\]\.email: must be an email address/m,
        /^\$\.organizations\[0\]\.users\[5\]\.firstname: must not contain control characters/m,
        /^\$\.organizations\[0\]\.rooms\[0\]\.members\[2\]: unknown user id "nobody"/m,
      ],
    ],
    [
      'an unknown member in an organization whose id is invalid',
      {
        organizations: [
          {
            id: 'not valid!',
            users: [
              { id: 'm1', email: 'm1@bad.example' },
              { id: 'm2', email: 'broken' },
            ],
            rooms: [{ id: 'r1', members: ['m1', 'm2', 'ghost'] }],
          },
        ],
      },
      [
        /^\$\.organizations\[0\]\.id: /m,
        /^\$\.organizations\[0\]\.users\[1\]\.email: /m,
        /^\$\.organizations\[0\]\.rooms\[0\]\.members\[2\]: unknown user id "ghost"/m,
      ],
    ],
    [
      'an email that belongs to another stored user',
      { organizations: [{ id: 'acme', name: 'Acme AG', users: [{ id: 'new', email: 'Zoe@ACME.example' }] }] },
      [/^\$\.organizations\[0\]\.users\[0\]\.email: email "Zoe@ACME.example" already belongs to user "u4"/m],
    ],
  ];

  for (const [name, content, expected] of refused) {
    it(`refuses ${name}: exit 1, every problem listed, nothing changed`, async () => {
      const before = await snapshot();
      const result = await runCli(['import', write(`bad-${name.replaceAll(' ', '-')}.json`, content)], env());
      assert.equal(result.code, 1, result.stdout);
      for (const pattern of expected) assert.match(result.stderr, pattern);
      assert.match(result.stderr, /problem\(s\) found; nothing was changed\.$/m);
      assert.deepEqual(await snapshot(), before);
    });
  }

  it('lets users listed in one file trade emails', async () => {
    const swapped = {
      organizations: [
        {
          ...ACME,
          users: ACME.users.map((user) =>
            user.id === 'u1' ? { ...user, email: 'zoe@acme.example' } : user.id === 'u4' ? { ...user, email: 'anna@acme.example' } : user,
          ),
        },
      ],
    };
    const result = await runCli(['import', write('swap.json', swapped)], env());
    assert.equal(result.code, 0, result.stderr);
    const emails = (await snapshot())[1]!
      .filter((row) => (row as { org_id: string }).org_id === 'acme')
      .map((row) => `${(row as { id: string }).id}=${(row as { email: string }).email}`);
    assert.ok(emails.includes('u1=zoe@acme.example') && emails.includes('u4=anna@acme.example'), emails.join());
  });

  it('keeps stored members and settings that a file leaves out', async () => {
    const result = await runCli(
      ['import', write('partial.json', { organizations: [{ id: 'acme', name: 'Acme AG', rooms: [{ id: 'board', name: 'Board' }] }] })],
      env(),
    );
    assert.equal(result.code, 0, result.stderr);
    const [organizations, , , members] = await snapshot();
    assert.equal((organizations!.find((row) => (row as { id: string }).id === 'acme') as { external_signatories: number }).external_signatories, 1);
    assert.deepEqual(
      members!.filter((row) => (row as { room_id: string }).room_id === 'board').map((row) => (row as { user_id: string }).user_id),
      ['u1'],
    );
  });

  it('accepts members imported by an earlier file', async () => {
    const result = await runCli(
      ['import', write('members.json', { organizations: [{ id: 'acme', name: 'Acme AG', rooms: [{ id: 'late', members: ['u2', 'u3'] }] }] })],
      env(),
    );
    assert.equal(result.code, 0, result.stderr);
  });

  it('reads keys in any order: rooms before the users they name, the organization id last', async () => {
    const text = `\uFEFF{"credentials": [],
      "organizations": [{
        "rooms": [{"id": "order", "name": "Order", "members": ["n2", "u1", "n1"]}],
        "users": [
          {"email": "n1@acme.example", "id": "n1", "lastname": "First"},
          {"id": "n2", "email": "n2@acme.example", "firstname": "Second"}
        ],
        "name": "Acme AG",
        "id": "acme"
      }]}`;
    const result = await runCli(['import', write('order.json', text)], env());
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /imported 1 organization\(s\), 2 user\(s\), 1 room\(s\) with 3 member\(s\)/);
    const members = await workspace.sql<{ user_id: string }>(
      sql`SELECT user_id FROM room_members WHERE org_id = 'acme' AND room_id = 'order' ORDER BY user_id`,
    );
    assert.deepEqual(
      members.map((row) => row.user_id),
      ['n1', 'n2', 'u1'],
    );
    const users = await workspace.sql<{ id: string; firstname: string | null; lastname: string | null }>(
      sql`SELECT id, firstname, lastname FROM users WHERE org_id = 'acme' AND id IN ('n1', 'n2') ORDER BY id`,
    );
    assert.deepEqual(
      users.map((row) => ({ ...row })),
      [
        { id: 'n1', firstname: null, lastname: 'First' },
        { id: 'n2', firstname: 'Second', lastname: null },
      ],
    );
  });

  it('keeps the search index in step with re-imported users', async () => {
    const hits =
      TEST_DIALECT === 'sqlite'
        ? // The integrity check throws when the trigram index disagrees with the users table.
          await workspace.sql<{ id: string }>(
            sql`INSERT INTO users_search(users_search, rank) VALUES ('integrity-check', 1)`,
            sql`SELECT u.id FROM users u WHERE u.seq IN (SELECT rowid FROM users_search WHERE users_search MATCH '"zoe" AND "oe@"') ORDER BY u.id`,
          )
        : // Forced through the trigram index, which must agree with the users table.
          await workspace.sql<{ id: string }>(sql`SET enable_seqscan = off`, sql`SELECT id FROM users WHERE search_key LIKE '%zoe@%' ORDER BY id`);
    assert.deepEqual(
      hits.map((row) => row.id),
      ['u1'],
    );
  });

  it('leaves a copy of the search index of a large organization it changes much, where SIGNROOM_SEARCH_COPIES_DIR says', async () => {
    const copies = path.join(dataDir, 'shared-copies');
    const copyEnv = { ...env(), SIGNROOM_SEARCH_MIN_USERS: '0', SIGNROOM_SEARCH_COPIES_DIR: copies };
    const users = (name: string) => Array.from({ length: MAX_LAID_OVER + 1 }, (_, k) => ({ id: `l${k}`, lastname: name, email: `l${k}@large.example` }));
    const importLarge = (name: string, extra: Record<string, string> = {}) =>
      runCli(['import', write(`large-${name}.json`, { organizations: [{ id: 'large', name: 'Large', users: users(name) }] })], { ...copyEnv, ...extra });
    const first = await importLarge('First');
    assert.equal(first.code, 0, first.stderr);
    assert.equal(existsSync(copies), false, 'a first import leaves none: no server holds an index of the organization');
    const renamed = await importLarge('Renamed');
    assert.equal(renamed.code, 0, renamed.stderr);
    assert.deepEqual(readdirSync(copies), ['org-large.index']);
    assert.equal(existsSync(path.join(dataDir, 'search-indexes')), false, 'not in the data directory');
    // Below SIGNROOM_SEARCH_MIN_USERS (20,000 by default), an organization gets no index, and no copy.
    rmSync(copies, { recursive: true });
    const small = await importLarge('Again', { SIGNROOM_SEARCH_MIN_USERS: '' });
    assert.equal(small.code, 0, small.stderr);
    assert.equal(existsSync(copies), false);
  });

  it('sets and revokes a credential', async () => {
    const set = await runCli(['credential', 'set', 'alice', 'acme,other'], { ...env(), SIGNROOM_PASSWORD: 'a:lice-pässword' });
    assert.equal(set.code, 0, set.stderr);
    const stored = (await snapshot())[4]!.find((row) => (row as { username: string }).username === 'alice') as { organizations: string; password_hash: string };
    assert.equal(stored.organizations, '["acme","other"]');
    assert.match(stored.password_hash, /^\$scrypt\$ln=14,r=8,p=5\$/);
    assert.doesNotMatch(stored.password_hash, /lice/);
    const fromStdin = await runCli(['credential', 'set', 'bob', '*'], env(), { input: 'bob-secret\n' });
    assert.equal(fromStdin.code, 0, fromStdin.stderr);
    const revoke = await runCli(['credential', 'revoke', 'alice'], env());
    assert.equal(revoke.code, 0);
    assert.equal(
      (await snapshot())[4]!.some((row) => (row as { username: string }).username === 'alice'),
      false,
    );
    assert.equal((await runCli(['credential', 'revoke', 'alice'], env())).code, 1);
    assert.equal((await runCli(['credential', 'set', 'x:y', 'acme'], { ...env(), SIGNROOM_PASSWORD: 'p' })).code, 1);
    assert.equal((await runCli(['credential', 'set', 'carol', 'bad org!'], { ...env(), SIGNROOM_PASSWORD: 'p' })).code, 2);
  });

  it('asks for the password at a terminal, twice and unshown, and notes an organization that does not exist yet', async () => {
    // An arrow key typed in the first (an escape sequence, not part of the password).
    const set = await runCliAtTerminal(['credential', 'set', 'tess', 'acme,not-yet'], env(), ['tess-terminal-p\u001b[Dass', 'tess-terminal-pass']);
    assert.equal(set.code, 0, set.screen);
    assert.match(set.screen, /^password for "tess": \nthe same password again: \n/);
    assert.doesNotMatch(set.screen, /tess-terminal-pass/, 'the password is not shown');
    assert.match(set.screen, /credential "tess" set\nsignroom: note: no organization "not-yet" yet; the credential covers it once it is created/);
    assert.doesNotMatch(set.screen, /no organization "acme"/);
    const stored = (await snapshot())[4]!.find((row) => (row as { username: string }).username === 'tess') as { organizations: string } | undefined;
    assert.equal(stored?.organizations, '["acme","not-yet"]');
    // Both pasted at once, each line ending in CR LF: one line end each.
    const pasted = await runCliAtTerminal(['credential', 'set', 'tom', 'acme'], env(), ['tom-pasted-pass\r\ntom-pasted-pass\r']);
    assert.equal(pasted.code, 0, pasted.screen);
    // Two that differ, or none: nothing is stored.
    for (const answers of [['one-password', 'another-one'], ['']]) {
      const refused = await runCliAtTerminal(['credential', 'set', 'tina', 'acme'], env(), answers);
      assert.equal(refused.code, 1, refused.screen);
      assert.match(refused.screen, /signroom: (the two passwords differ|no password given); nothing was changed/);
    }
    assert.equal(
      (await snapshot())[4]!.some((row) => (row as { username: string }).username === 'tina'),
      false,
    );
  });

  it('uploads a document for a quick demo, and refuses what the API would refuse', async () => {
    const pdf = write('hello.pdf', topHalfBlackPdf().toString('latin1'));
    writeFileSync(pdf, topHalfBlackPdf());
    const stored = await runCli(['upload', 'acme', 'board', pdf], env());
    assert.equal(stored.code, 0, stored.stderr);
    const printed = JSON.parse(stored.stdout) as { id: string; pageCount: number; thumbnail: string };
    assert.deepEqual({ pageCount: printed.pageCount, thumbnail: printed.thumbnail }, { pageCount: 1, thumbnail: 'rendered' });
    const rows = await workspace.sql<{ name: string; uploaded_by: string }>(sql`SELECT name, uploaded_by FROM documents WHERE id = ${printed.id}`);
    assert.deepEqual(
      rows.map((row) => ({ ...row })),
      [{ name: 'hello.pdf', uploaded_by: 'cli' }],
    );
    const text = await runCli(['upload', 'acme', 'board', path.join(dataDir, 'directory.json')], env());
    assert.equal(text.code, 1);
    assert.match(text.stderr, /^signroom: unsupported-media-type: /m);
  });

  it('names the file it cannot read', async () => {
    const result = await runCli(['import', path.join(dataDir, 'missing.json')], env());
    assert.equal(result.code, 1);
    assert.match(result.stderr, /cannot read .*missing\.json: ENOENT/);
    assert.ok(readFileSync(path.join(dataDir, 'directory.json')).length > 0);
    const notAFile = await runCli(['import', dataDir], env());
    assert.equal(notAFile.code, 1);
    assert.match(notAFile.stderr, /cannot read .*: not a regular file \(the import reads it twice/);
  });
});

describe('bin/signroom against a database migrated by a later version', () => {
  it('refuses to import or serve, naming the unknown migration, and writes nothing', async () => {
    const workspace = await cliWorkspace();
    try {
      assert.equal((await runCli(['migrate'], workspace.env)).code, 0);
      await workspace.sql(sql`INSERT INTO kysely_migration (name, timestamp) VALUES ('2099-01-01T0000-from-a-later-version', '2099-01-01T00:00:00.000Z')`);
      const file = path.join(workspace.dataDir, 'directory.json');
      writeFileSync(file, JSON.stringify(DIRECTORY));
      for (const args of [['import', file], ['serve']]) {
        const result = await runCli(args, { ...workspace.env, PORT: '0' });
        assert.equal(result.code, 1, args[0]);
        assert.match(result.stderr, /newer schema than this signroom knows \(migration "2099-01-01T0000-from-a-later-version"\)/);
        assert.doesNotMatch(result.stderr, /\n\s+at /, 'a message, not a stack trace');
      }
      assert.deepEqual(await workspace.sql(sql`SELECT id FROM organizations`), []);
    } finally {
      await workspace.close();
    }
  });
});
