import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import fc from 'fast-check';
import { ELEMENT, JsonFile, JsonFileChanged, JsonSyntaxError, LazyJsonArray, type PathPattern } from '../../src/directory/json-file.ts';

const dir = mkdtempSync(path.join(tmpdir(), 'signroom-json-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
function fileWith(text: string | Buffer): string {
  const name = path.join(dir, `f${files++}.json`);
  writeFileSync(name, text);
  return name;
}

const STREAMED: PathPattern[] = [
  ['organizations', ELEMENT, 'users'],
  ['organizations', ELEMENT, 'rooms'],
];

/** The parsed value with every lazy array read out, to compare with JSON.parse. */
function materialize(value: unknown): unknown {
  if (value instanceof LazyJsonArray) return [...value].map(materialize);
  if (Array.isArray(value)) return value.map(materialize);
  if (typeof value === 'object' && value !== null) {
    const copy: Record<string, unknown> = {};
    for (const [key, inner] of Object.entries(value)) Object.defineProperty(copy, key, { value: materialize(inner), enumerable: true });
    return copy;
  }
  return value;
}

/** Parses with windows small enough that values straddle many reads. */
function parseEach(text: string, windows = [16, 64, 1 << 20]): unknown[] {
  return windows.map((windowBytes) => {
    const file = JsonFile.open(fileWith(text), { windowBytes });
    try {
      return materialize(file.parse(STREAMED));
    } finally {
      file.close();
    }
  });
}

const jsonText = fc.oneof(
  fc.json({ depthSize: 'small' }),
  fc
    .record({
      organizations: fc.array(
        fc.record({
          id: fc.string(),
          users: fc.array(fc.jsonValue({ maxDepth: 2 })),
          rooms: fc.jsonValue({ maxDepth: 2 }),
          name: fc.jsonValue({ maxDepth: 1 }),
        }),
        { maxLength: 3 },
      ),
      credentials: fc.jsonValue({ maxDepth: 2 }),
    })
    .chain((doc) => fc.constantFrom(JSON.stringify(doc), JSON.stringify(doc, null, 3), JSON.stringify(doc, null, '\t').replaceAll('\n', '\r\n'))),
);

describe('JsonFile', () => {
  it('gives what JSON.parse gives, with the streamed arrays read element by element', () => {
    fc.assert(
      fc.property(jsonText, (text) => {
        for (const parsed of parseEach(text)) assert.deepEqual(parsed, JSON.parse(text));
      }),
      { numRuns: 300 },
    );
  });

  it('reads a long streamed array in runs of elements, each run ending where an element does', () => {
    // Several runs of elements (each about 16 KiB), with strings, escapes, nesting and white space.
    const users = Array.from({ length: 3_000 }, (_, k) =>
      k % 7 === 0 ? [k, null, { deep: [`"${k}\\`] }] : k % 5 === 0 ? `Müller ${k} ]},[{` : { id: `u${k}`, name: `Zoë "${k}"`, n: k / 3, ok: k % 2 === 0 },
    );
    const doc = { organizations: [{ id: 'a', users, rooms: [] }], credentials: [] };
    for (const text of [JSON.stringify(doc), JSON.stringify(doc, null, 2)]) {
      for (const parsed of parseEach(text, [16, 4096, 1 << 20])) assert.deepEqual(parsed, doc);
    }
  });

  it('reads strings with escaped quotes and backslashes and multi-byte characters across reads', () => {
    const doc = { organizations: [{ id: 'a"b\\', users: [{ name: 'Müller "\\" 😀', email: '\\' }, 'x\\\\"y'], rooms: [] }], credentials: [] };
    for (const parsed of parseEach(JSON.stringify(doc), [16, 17, 18, 19, 20])) assert.deepEqual(parsed, doc);
  });

  it('keeps a __proto__ key a plain key, as JSON.parse does', () => {
    const text = '{"__proto__": {"polluted": true}, "organizations": [{"__proto__": 1, "users": []}]}';
    const [parsed] = parseEach(text, [1 << 20]) as [Record<string, unknown>];
    assert.deepEqual(parsed, JSON.parse(text));
    assert.equal(Object.getPrototypeOf(parsed), Object.prototype);
    assert.equal(({} as Record<string, unknown>)['polluted'], undefined);
  });

  it('skips a UTF-8 byte order mark', () => {
    const file = JsonFile.open(fileWith(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"a": [1]}')])));
    assert.deepEqual(materialize(file.parse(STREAMED)), { a: [1] });
    file.close();
  });

  it('reads a streamed array again on each iteration', () => {
    const file = JsonFile.open(fileWith('{"organizations": [{"users": [1, {"a": 2}, "3"]}]}'), { windowBytes: 16 });
    const users = (file.parse(STREAMED) as { organizations: { users: LazyJsonArray }[] }).organizations[0]!.users;
    assert.ok(users instanceof LazyJsonArray);
    assert.deepEqual([...users], [1, { a: 2 }, '3']);
    assert.deepEqual([...users], [1, { a: 2 }, '3']);
    file.close();
  });

  const invalid = [
    '',
    '{',
    '{"organizations": [',
    '{"organizations": [{"users": [1, 2}]}',
    '{"organizations": [{"users": [1 2]}]}',
    '{"organizations": [{"users": [1,]}]}',
    '{"organizations": [{"users": [{"a": tru}]}]}',
    '{"organizations": [{"users": ["unterminated]}]}',
    '{"organizations": [{"users": []}]} trailing',
    '{"a": 1,}',
    '{a: 1}',
    '[1, 2',
    '{"organizations": [{"users": [{"a": "\u0001"}]}]}',
    // A later duplicate key replaces an array left in the file: it must still be valid JSON.
    '{"organizations": [{"id": "acme", "users": [nonsense], "users": []}]}',
    '{"organizations": [{"rooms": [1, "\\x"], "rooms": []}]}',
    '{"organizations": [{"users": [{"id": "x",}]}], "organizations": []}',
    // A key that reads like a path pattern is only a key.
    '{"organizations": {"*": {"users": [garbage]}}}',
  ];
  for (const text of invalid) {
    it(`refuses invalid JSON like JSON.parse: ${JSON.stringify(text)}`, () => {
      assert.throws(() => JSON.parse(text));
      for (const windowBytes of [16, 1 << 20]) {
        const file = JsonFile.open(fileWith(text), { windowBytes });
        assert.throws(() => materialize(file.parse(STREAMED)), JsonSyntaxError);
        file.close();
      }
    });
  }

  it('says at which byte of the file JSON.parse stopped, not where in the element', () => {
    const prefix = '{"organizations": [{"users": [1, {"ü": 1},\n';
    const file = JsonFile.open(fileWith(`${prefix}{"ü": 1, "a" 1}]}]}`), { windowBytes: 16 });
    const error = (() => {
      try {
        materialize(file.parse(STREAMED));
      } catch (caught) {
        return caught as JsonSyntaxError;
      }
      return undefined;
    })();
    file.close();
    assert.ok(error instanceof JsonSyntaxError);
    // The byte of "1" after "a": the prefix, then `{"ü": 1, "a" ` (ü is two bytes).
    assert.equal(error.offset, Buffer.byteLength(prefix) + Buffer.byteLength('{"ü": 1, "a" '));
    assert.doesNotMatch(error.message, /position|line/);
  });

  it('says which element of a long streamed array is at fault, as reading one at a time would', () => {
    const users = Array.from({ length: 300 }, (_, k) => `{"id":"u${k}","email":"u${k}@x.example","external":false}`);
    const errorIn = (elements: string[]) => {
      const text = `{"organizations": [{"users": [${elements.join(',')}]}]}`;
      const file = JsonFile.open(fileWith(text), { windowBytes: 4096 });
      try {
        materialize(file.parse(STREAMED));
      } catch (error) {
        assert.ok(error instanceof JsonSyntaxError);
        return { offset: error.offset, text };
      } finally {
        file.close();
      }
      assert.fail('no error');
    };
    const between = (offset: number, text: string, element: string) => {
      const start = Buffer.byteLength(text.slice(0, text.indexOf(element)));
      assert.ok(offset >= start && offset < start + element.length, `${offset} is not within ${start}..${start + element.length}`);
    };
    // A token JSON.parse refuses (its message gives no position): the element's own start.
    const bad = users.map((user, k) => (k === 250 ? user.replace('false', 'fals') : user));
    const refused = errorIn(bad);
    between(refused.offset, refused.text, bad[250]!);
    // Such an element, then a comma missing further on in the same run (brackets and strings are
    // checked for the whole array before any element is read; commas only as they are read): the
    // first fault is reported.
    const both = [...bad.slice(0, 252), `${bad[252]} ${bad[253]}`, ...bad.slice(254)];
    const first = errorIn(both);
    between(first.offset, first.text, bad[250]!);
  });

  it('refuses what is not a regular file (it is read twice), a FIFO without a writer too, at once', () => {
    assert.throws(() => JsonFile.open('/dev/null'), { code: 'ENOTREGULAR' });
    assert.throws(() => JsonFile.open(dir), { code: 'ENOTREGULAR' });
    const fifo = path.join(dir, 'fifo');
    execFileSync('mkfifo', [fifo]);
    assert.throws(() => JsonFile.open(fifo), { code: 'ENOTREGULAR' });
  });

  it('checks a replaced value without walking what JSON.parse built, however deep', () => {
    const deep = `${'['.repeat(200_000)}${']'.repeat(200_000)}`;
    const file = JsonFile.open(fileWith(`{"organizations": [{"id": "a", "x": ${deep}, "x": 1, "users": [1], "users": [2]}]}`));
    const parsed = file.parse(STREAMED) as { organizations: { x: unknown; users: LazyJsonArray }[] };
    assert.equal(parsed.organizations[0]!.x, 1);
    assert.deepEqual([...parsed.organizations[0]!.users], [2]);
    file.close();
  });

  it('notices that the file was written since it was opened', () => {
    const name = fileWith('{"organizations": []}');
    const file = JsonFile.open(name);
    file.assertUnchanged();
    appendFileSync(name, ' ');
    assert.throws(() => file.assertUnchanged(), JsonFileChanged);
    file.close();
  });
});
