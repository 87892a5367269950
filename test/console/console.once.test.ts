/// <reference lib="dom" />
/**
 * The admin console (contract section 11) driven in a real Chromium by the accessible names the
 * contract fixes, against the real app on the real database, with axe-core on every view.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Browser, Locator, Page } from 'playwright-core';
import { sql } from 'kysely';
import sharp from 'sharp';
import { buildApp } from '../../src/app.ts';
import { launchChromium, openPage, seriousAxeViolations } from '../helpers/browser.ts';
import { corpusDir } from '../helpers/corpus.ts';
import { ACME, ACME_PASSWORD, OTHER } from '../helpers/fixtures.ts';
import { makePdf } from '../helpers/pdf.ts';
import { basic, LOOKUP, startTestApp, type TestApp } from '../helpers/test-app.ts';

/** Enough people for three pages of 20, with names that sort apart from the fixture's. */
const PEOPLE = Array.from({ length: 45 }, (_, index) => ({
  id: `p${String(index).padStart(2, '0')}`,
  firstname: `Person`,
  lastname: `Number${String(index).padStart(2, '0')}`,
  email: `person${String(index).padStart(2, '0')}@acme.example`,
}));

const DIRECTORY = {
  organizations: [{ ...ACME, users: [...ACME.users, ...PEOPLE] }, OTHER],
  credentials: [
    { username: 'root', password: 'root-password', organizations: '*' },
    { username: 'acme-admin', password: ACME_PASSWORD, organizations: ['acme'] },
    { username: 'nobody', password: 'nobody-password', organizations: [] },
    { username: 'temp-admin', password: 'temp-password', organizations: ['acme'] },
    { username: 'locked-out', password: 'right-password', organizations: ['acme'] },
    { username: 'narrowed-admin', password: 'narrowed-password', organizations: ['acme', 'other'] },
  ],
};
const ADMIN = basic('acme-admin', ACME_PASSWORD);
/** Small, so that a file over the limit is quick to make and send. */
const MAX_DOCUMENT_BYTES = 200_000;

let t: TestApp;
let browser: Browser;
let url: string;

async function lookupTotal(query: Record<string, string>): Promise<number> {
  const response = await t.app.inject({ url: `${LOOKUP('acme', 'board')}?${new URLSearchParams(query)}`, headers: { authorization: ADMIN } });
  assert.equal(response.statusCode, 200, response.body);
  return response.json().totalElements;
}

async function signIn(page: Page, username = 'acme-admin', password = ACME_PASSWORD): Promise<void> {
  await page.getByRole('textbox', { name: 'Username' }).fill(username);
  await page.getByRole('textbox', { name: 'Password' }).fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

/** Signs in as acme-admin by keyboard alone (Tab, typing, Enter) and waits for the signatories. */
async function signInByKeyboard(page: Page): Promise<void> {
  await page.keyboard.press('Tab');
  await page.keyboard.type('acme-admin');
  await page.keyboard.press('Tab');
  await page.keyboard.type(ACME_PASSWORD);
  await page.keyboard.press('Enter');
  await page
    .getByRole('status')
    .filter({ hasText: /signatories$/ })
    .waitFor();
}

/** Signs in and waits for the signatories of the first room. */
async function openConsole(viewport?: { width: number; height: number }) {
  const opened = await openPage(browser, url, viewport);
  await signIn(opened.page);
  await opened.page
    .getByRole('status')
    .filter({ hasText: /signator/ })
    .waitFor();
  return opened;
}

async function expectStatus(page: Page, text: string): Promise<void> {
  await page
    .getByRole('status')
    .filter({ hasText: new RegExp(`^${text}$`) })
    .waitFor({ timeout: 5_000 });
}

async function noSeriousViolations(page: Page, view: string): Promise<void> {
  assert.deepEqual(await seriousAxeViolations(page), [], `axe-core on ${view}`);
}

/** Waits until the document's thumbnail is a real, decoded image (not the "No preview" stand-in). */
async function expectThumbnail(page: Page, name: string): Promise<void> {
  await page.getByRole('img', { name }).waitFor();
  await page.waitForFunction((alt) => [...document.images].some((image) => image.alt === alt && image.complete && image.naturalWidth > 0), name);
}

/** Presses Tab until `target` has the focus, as a keyboard user would reach it. */
async function tabTo(page: Page, target: Locator, limit = 60): Promise<void> {
  for (let presses = 0; presses < limit; presses++) {
    if (await hasFocus(target)) return;
    await page.keyboard.press('Tab');
  }
  assert.fail(`${String(target)} was not reached in ${limit} presses of Tab`);
}

function hasFocus(target: Locator): Promise<boolean> {
  return target.evaluate((element) => element === document.activeElement);
}

/** Waits until `target` has the focus. */
async function expectFocused(target: Locator): Promise<void> {
  const until = performance.now() + 5_000;
  while (!(await hasFocus(target))) {
    if (performance.now() > until) assert.fail(`${String(target)} did not get the focus`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function names(page: Page): Promise<string[]> {
  return page.locator('tbody tr td:first-child').allTextContents();
}

/** Waits until the table's first column reads `expected` (answers arrive after the header changes). */
async function expectNames(page: Page, expected: string[]): Promise<void> {
  try {
    await page.waitForFunction(
      (want) => JSON.stringify([...document.querySelectorAll('tbody tr td:first-child')].map((cell) => cell.textContent)) === want,
      JSON.stringify(expected),
      { timeout: 5_000 },
    );
  } finally {
    assert.deepEqual(await names(page), expected);
  }
}

describe('admin console', () => {
  before(async () => {
    t = await startTestApp({ SIGNROOM_MAX_DOCUMENT_BYTES: String(MAX_DOCUMENT_BYTES) });
    await t.importDirectory(DIRECTORY);
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    url = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}/console/`;
    browser = await launchChromium();
  });

  after(async () => {
    await browser?.close();
    await t?.close();
  });

  it('refuses a wrong password with an alert and shows no console, then signs in with the right one, keeping the credential for the tab only', async () => {
    const { page, scriptErrors, foreignRequests } = await openPage(browser, url);
    await noSeriousViolations(page, 'the sign-in form');
    await signIn(page, 'acme-admin', 'wrong password');
    assert.match((await page.getByRole('alert').textContent()) ?? '', /wrong username or password/i);
    assert.equal(await page.getByRole('combobox', { name: 'Organization' }).count(), 0);

    await signIn(page);
    await expectStatus(page, `${await lookupTotal({})} signatories`);
    assert.equal(await page.getByRole('combobox', { name: 'Organization' }).inputValue(), 'acme');
    assert.equal(await page.getByRole('combobox', { name: 'Room' }).inputValue(), 'board');
    const storage = await page.evaluate(() => ({ local: JSON.stringify(localStorage), session: Object.keys(sessionStorage), href: location.href }));
    assert.equal(storage.local, '{}');
    assert.deepEqual(storage.session, ['signroom.credential']);
    for (const secret of ['acme-admin', ACME_PASSWORD, encodeURIComponent(ACME_PASSWORD), ADMIN.slice('Basic '.length)]) {
      assert.ok(!storage.href.includes(secret), `${secret} in ${storage.href}`);
    }
    await noSeriousViolations(page, 'the signing room view');
    assert.deepEqual(scriptErrors, []);
    assert.deepEqual(foreignRequests, []);
    await page.context().close();
  });

  it('says so when the credential covers no organization', async () => {
    const { page } = await openPage(browser, url);
    await signIn(page, 'nobody', 'nobody-password');
    assert.match((await page.getByRole('alert').textContent()) ?? '', /covers no organization/);
    await noSeriousViolations(page, 'the view of a credential without organizations');
    await page.context().close();
  });

  it('answers repeated wrong passwords with how long to wait (429), in words', async () => {
    const { page } = await openPage(browser, url);
    const alert = page.getByRole('alert');
    for (let attempt = 1; attempt <= t.config.login.maxFailures; attempt++) {
      await signIn(page, 'locked-out', `wrong ${attempt}`);
      await alert.filter({ hasText: 'Wrong username or password.' }).waitFor();
      await page.getByRole('button', { name: 'Sign in' }).and(page.locator(':enabled')).waitFor();
    }
    await signIn(page, 'locked-out', 'right-password');
    await alert.filter({ hasText: /^Too many failed sign-ins for this username\. Try again in \d+ seconds\.$/ }).waitFor();
    await noSeriousViolations(page, 'the sign-in form refusing for a while (429)');
    assert.equal(await page.getByRole('combobox', { name: 'Organization' }).count(), 0);
    await page.context().close();
  });

  it('signs out, saying why, when the credential is revoked while the console is open', async () => {
    const opened = await openPage(browser, url);
    const { page } = opened;
    await signIn(page, 'temp-admin', 'temp-password');
    await page
      .getByRole('status')
      .filter({ hasText: /signatories$/ })
      .waitFor();
    await t.sql(sql`DELETE FROM credentials WHERE username = 'temp-admin'`);
    await page.getByRole('searchbox', { name: 'Search signatories' }).fill('anna');
    await page.getByRole('alert').filter({ hasText: 'Your sign-in is no longer valid' }).waitFor();
    await page.getByRole('button', { name: 'Sign in' }).waitFor();
    await noSeriousViolations(page, 'the sign-in form after a revoked credential');
    assert.deepEqual(await page.evaluate(() => Object.keys(sessionStorage)), []);
    assert.deepEqual(opened.scriptErrors, []);
    await page.context().close();
  });

  it('switches organization and room by their names, asking only for rooms of the organization chosen', async () => {
    const { page, scriptErrors } = await openPage(browser, url);
    const missing: string[] = [];
    page.on('response', (response) => {
      if (response.status() === 404) missing.push(response.url());
    });
    await signIn(page, 'root', 'root-password');
    await expectStatus(page, `${await lookupTotal({})} signatories`);
    await page.getByRole('combobox', { name: 'Organization' }).selectOption({ label: 'Other Ltd' });
    await page.getByRole('combobox', { name: 'Room' }).and(page.locator(':enabled')).waitFor();
    assert.equal(await page.getByRole('combobox', { name: 'Room' }).inputValue(), 'lobby');
    await expectStatus(page, '1 signatory');
    assert.deepEqual(await names(page), ['Olga Other']);
    await noSeriousViolations(page, 'the signing room view of another organization');
    await page.getByRole('combobox', { name: 'Organization' }).selectOption({ label: 'Acme AG' });
    await page.getByRole('combobox', { name: 'Room' }).selectOption({ label: 'Empty' });
    await expectStatus(page, `${await lookupTotal({})} signatories`);
    assert.deepEqual(missing, []);
    assert.equal(await page.getByRole('alert').count(), 0);
    assert.deepEqual(scriptErrors, []);
    await page.context().close();
  });

  it('searches as one types, filters by purpose and shows the true total in a live region', async () => {
    const { page, scriptErrors } = await openConsole();
    const live = page.getByRole('status');
    assert.equal(await live.getAttribute('aria-live'), 'polite');
    const search = page.getByRole('searchbox', { name: 'Search signatories' });
    const before = `${await lookupTotal({})} signatories`;
    await expectStatus(page, before);
    // Every text the live region shows while typing, to be sure none is the count of the query before.
    await live.evaluate((region) => {
      const shown: string[] = [];
      (window as unknown as { shownStatuses: string[] }).shownStatuses = shown;
      new MutationObserver(() => shown.push(region.textContent ?? '')).observe(region, { childList: true, characterData: true, subtree: true });
    });
    await search.pressSequentially('mull', { delay: 60 });
    await expectStatus(page, `${await lookupTotal({ searchQuery: 'mull' })} signator(y|ies)`);
    assert.deepEqual(await names(page), ['Anna Müller']);
    const shown = await page.evaluate(() => (window as unknown as { shownStatuses: string[] }).shownStatuses);
    assert.ok(!shown.includes(before), `the live region said the earlier count while the new search ran: ${JSON.stringify(shown)}`);

    await search.fill('person number1');
    await expectStatus(page, '10 signatories');
    for (const text of ['%', '"quoted"', "O'Brien", '🔑 emoji', '_\\']) {
      await search.fill(text);
      const total = await lookupTotal({ searchQuery: text });
      await expectStatus(page, `${total} ${total === 1 ? 'signatory' : 'signatories'}`);
    }
    assert.equal(await page.getByRole('alert').count(), 0);

    await search.fill('');
    await expectStatus(page, `${await lookupTotal({})} signatories`);
    const purpose = page.getByRole('combobox', { name: 'Purpose' });
    const values = await purpose.locator('option').evaluateAll((options) => options.map((option) => (option as HTMLOptionElement).value));
    assert.deepEqual(values.sort(), ['PERMISSION_INVITATION', 'SIGNATORY_INVITATION', 'SIGNING_REQUEST_DELIVERY_RECIPIENT', 'SIGNING_REQUEST_SIGNATORY']);
    await purpose.selectOption('SIGNING_REQUEST_SIGNATORY');
    await expectStatus(page, '1 signatory');
    assert.deepEqual(await page.locator('tbody tr').first().locator('td').allTextContents(), ['Anna Müller', 'anna@acme.example', 'Yes', 'No']);
    await purpose.selectOption('PERMISSION_INVITATION');
    await expectStatus(page, `${await lookupTotal({ purpose: 'PERMISSION_INVITATION' })} signatories`);
    await noSeriousViolations(page, 'the signatories filtered by purpose');
    assert.deepEqual(scriptErrors, []);
    await page.context().close();
  });

  it('sorts by the Name and Email headers, ascending first and reversed on the second activation, and pages', async () => {
    const { page } = await openConsole();
    const api = async (query: Record<string, string>) => {
      const response = await t.app.inject({
        url: `${LOOKUP('acme', 'board')}?${new URLSearchParams({ size: '20', ...query })}`,
        headers: { authorization: ADMIN },
      });
      return (response.json().content as { displayName: string }[]).map((signatory) => signatory.displayName);
    };
    const nameHeader = page.getByRole('columnheader', { name: 'Name' });
    const emailHeader = page.getByRole('columnheader', { name: 'Email' });
    await emailHeader.click();
    await page.locator('th[aria-sort="ascending"]', { hasText: 'Email' }).waitFor();
    await expectNames(page, await api({ sortBy: 'email', sortDirection: 'ASC' }));
    await emailHeader.click();
    await page.locator('th[aria-sort="descending"]', { hasText: 'Email' }).waitFor();
    await expectNames(page, await api({ sortBy: 'email', sortDirection: 'DESC' }));
    await nameHeader.click();
    await page.locator('th[aria-sort="ascending"]', { hasText: 'Name' }).waitFor();
    assert.equal(await emailHeader.getAttribute('aria-sort'), 'none');
    await expectNames(page, await api({ sortBy: 'firstname', sortDirection: 'ASC' }));

    // Keyboard only: the header is a button; Enter reverses the order.
    await page.getByRole('button', { name: 'Name' }).focus();
    await page.keyboard.press('Enter');
    await page.locator('th[aria-sort="descending"]', { hasText: 'Name' }).waitFor();
    await expectNames(page, await api({ sortBy: 'firstname', sortDirection: 'DESC' }));

    await page.getByRole('button', { name: 'Next page' }).click();
    await page.getByText('Page 2 of 3').waitFor();
    await expectNames(page, await api({ sortBy: 'firstname', sortDirection: 'DESC', page: '1' }));
    await noSeriousViolations(page, 'the second page, sorted by name descending');
    await page.getByRole('button', { name: 'Previous page' }).click();
    await page.getByText('Page 1 of 3').waitFor();
    assert.equal(await page.getByRole('button', { name: 'Previous page' }).isDisabled(), true);
    await page.context().close();
  });

  it('uploads a PDF with the file picker and a PNG by drag and drop, and shows each with its thumbnail named by the document', async () => {
    const { page, scriptErrors, foreignRequests } = await openConsole();
    await page.getByLabel('Upload document').setInputFiles({
      name: 'Contract draft.pdf',
      mimeType: 'application/pdf',
      buffer: makePdf([{ width: 300, height: 400, content: 'BT /F1 24 Tf 40 300 Td (Contract) Tj ET' }]),
    });
    await expectThumbnail(page, 'Contract draft.pdf');

    const png = await sharp({ create: { width: 40, height: 30, channels: 3, background: '#336699' } })
      .png()
      .toBuffer();
    const dropped = await page.evaluateHandle((base64) => {
      const bytes = Uint8Array.from(atob(base64), (char) => char.charCodeAt(0));
      const transfer = new DataTransfer();
      transfer.items.add(new File([bytes], 'Signature page.png', { type: 'image/png' }));
      return transfer;
    }, png.toString('base64'));
    await page.locator('section', { has: page.getByRole('heading', { name: 'Documents' }) }).dispatchEvent('drop', { dataTransfer: dropped });
    await expectThumbnail(page, 'Signature page.png');

    const listed = await t.app.inject({ url: '/admin/api/v3/organizations/acme/rooms/board/documents', headers: { authorization: ADMIN } });
    assert.deepEqual(
      (listed.json().content as { name: string }[]).map((document) => document.name),
      ['Signature page.png', 'Contract draft.pdf'],
    );
    await noSeriousViolations(page, 'the signing room view with documents');
    assert.deepEqual(scriptErrors, []);
    assert.deepEqual(foreignRequests, []);
    await page.context().close();
  });

  it('explains a text file (415), a file over the size limit (413) and an encrypted PDF (422), and stays usable', async () => {
    const { page, scriptErrors } = await openConsole();
    const input = page.getByLabel('Upload document');
    const alert = page.getByRole('alert');

    await input.setInputFiles({ name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('just some text\n') });
    await alert.filter({ hasText: 'notes.txt' }).waitFor();
    assert.match((await alert.textContent()) ?? '', /cannot be uploaded\. Upload a PDF, PNG or JPEG/);

    for (const factor of [2, 10]) {
      const noise = Buffer.alloc(MAX_DOCUMENT_BYTES * factor);
      for (let index = 0; index < noise.length; index++) noise[index] = (index * 2654435761) >>> 24;
      await input.setInputFiles({ name: `scan-${factor}.pdf`, mimeType: 'application/pdf', buffer: Buffer.concat([Buffer.from('%PDF-1.7\n'), noise]) });
      await alert.filter({ hasText: `scan-${factor}.pdf` }).waitFor();
      assert.match((await alert.textContent()) ?? '', /too large to upload/);
    }

    await input.setInputFiles({ name: 'locked.pdf', mimeType: 'application/pdf', buffer: readFileSync(path.join(corpusDir(), 'issue15893_reduced.pdf')) });
    await alert.filter({ hasText: 'locked.pdf' }).waitFor();
    assert.match((await alert.textContent()) ?? '', /protected by a password/);
    await noSeriousViolations(page, 'the upload error messages');

    // Still usable: a valid document goes through after all that.
    await input.setInputFiles({
      name: 'After errors.pdf',
      mimeType: 'application/pdf',
      buffer: makePdf([{ width: 300, height: 400, content: '0 0 0 rg 20 20 100 100 re f' }]),
    });
    await expectThumbnail(page, 'After errors.pdf');
    assert.equal(await alert.count(), 0);
    assert.deepEqual(scriptErrors, []);
    await page.context().close();
  });

  it('adds, edits, suspends and deletes a user, creates a room and changes its members', async () => {
    const { page, scriptErrors } = await openConsole();
    await page.getByRole('button', { name: 'Directory' }).click();
    await page.getByRole('heading', { name: 'Users' }).waitFor();
    await noSeriousViolations(page, 'the directory view');

    await page.getByRole('button', { name: 'Add user' }).click();
    await page.getByRole('textbox', { name: 'First name' }).fill('Carla');
    await page.getByRole('textbox', { name: 'Last name' }).fill('Console');
    await page.getByRole('textbox', { name: 'Email' }).fill('carla@acme.example');
    await noSeriousViolations(page, 'the user form');
    await page.getByRole('button', { name: 'Save user' }).click();
    await page.getByText('Added Carla Console.').waitFor();
    const users = async (search: string) =>
      (
        await t.app.inject({ url: `/admin/api/v3/organizations/acme/users?searchQuery=${encodeURIComponent(search)}`, headers: { authorization: ADMIN } })
      ).json().content as { id: string; firstname: string; status: string }[];
    const [carla] = await users('carla@acme.example');
    assert.equal(carla?.firstname, 'Carla');

    await page.getByRole('searchbox', { name: 'Search users' }).fill('carla');
    await page.getByRole('button', { name: 'Edit Carla Console' }).click();
    await page.getByRole('textbox', { name: 'First name' }).fill('Carlotta');
    await page.getByRole('button', { name: 'Save user' }).click();
    await page.getByText('Saved Carlotta Console.').waitFor();
    assert.equal((await users('carla@acme.example'))[0]?.firstname, 'Carlotta');

    await page.getByRole('button', { name: 'Suspend Carlotta Console' }).click();
    await page.getByText('Suspended Carlotta Console.').waitFor();
    assert.equal((await users('carla@acme.example'))[0]?.status, 'suspended');
    await page.getByRole('button', { name: 'Reactivate Carlotta Console' }).click();
    await page.getByText('Reactivated Carlotta Console.').waitFor();
    assert.equal((await users('carla@acme.example'))[0]?.status, 'active');

    await page.getByRole('textbox', { name: 'Room name' }).fill('Supervisory board');
    await page.getByRole('textbox', { name: 'Room id (optional)' }).fill('supervisory');
    await page.getByRole('button', { name: 'Create room' }).click();
    await page.getByText('Created the room “Supervisory board”.').waitFor();
    await page.getByRole('combobox', { name: 'Room' }).selectOption('supervisory');
    await page.getByRole('heading', { name: 'Members of “Supervisory board”' }).waitFor();
    // More users than one page whose emails contain Carla's, all sorting before her by email and by name.
    const namesakes = Array.from({ length: 55 }, (_, k) => `a${String(k).padStart(2, '0')}.carla@acme.example`);
    for (const email of namesakes) {
      const created = await t.app.inject({
        method: 'POST',
        url: '/admin/api/v3/organizations/acme/users',
        headers: { authorization: ADMIN, 'content-type': 'application/json' },
        payload: { id: email.slice(0, 3), firstname: 'Aaron', lastname: 'Aardvark', email },
      });
      assert.equal(created.statusCode, 201, created.body);
    }
    await page.getByRole('textbox', { name: 'New member' }).fill('CARLA@acme.example');
    await page.getByRole('button', { name: 'Add member' }).click();
    await page.getByText('Added Carlotta Console to “Supervisory board”.').waitFor();
    // The room list counts the member at once, as the API does.
    await page.locator('.room-list li', { hasText: 'Supervisory board' }).getByText('1 member').waitFor();
    for (const email of namesakes) {
      const deleted = await t.app.inject({
        method: 'DELETE',
        url: `/admin/api/v3/organizations/acme/users/${email.slice(0, 3)}`,
        headers: { authorization: ADMIN },
      });
      assert.equal(deleted.statusCode, 204, deleted.body);
    }
    const members = async () =>
      (
        (await t.app.inject({ url: '/admin/api/v3/organizations/acme/rooms/supervisory/members', headers: { authorization: ADMIN } })).json().content as {
          id: string;
        }[]
      ).map((user) => user.id);
    assert.deepEqual(await members(), [carla?.id]);
    await page.getByRole('textbox', { name: 'New member' }).fill('no-such-person@acme.example');
    await page.getByRole('button', { name: 'Add member' }).click();
    await page.getByRole('alert').filter({ hasText: 'No user of this organization has the email address or user id “no-such-person@acme.example”.' }).waitFor();
    await page.getByRole('button', { name: 'Remove Carlotta Console from Supervisory board' }).click();
    await page.getByText('Removed Carlotta Console from “Supervisory board”.').waitFor();
    assert.deepEqual(await members(), []);
    await page.locator('.room-list li', { hasText: 'Supervisory board' }).getByText('0 members').waitFor();

    await page.getByRole('button', { name: 'Delete Carlotta Console' }).click();
    await page.getByText('Deleted Carlotta Console.').waitFor();
    assert.deepEqual(await users('carla@acme.example'), []);

    // The signatories of the new room follow the directory.
    await page.getByRole('button', { name: 'Signing room' }).click();
    await expectStatus(page, `${await lookupTotal({})} signatories`);
    assert.deepEqual(scriptErrors, []);
    await page.context().close();
  });

  it('refuses a duplicate email with a sentence, and reloads a user edited by someone else in the meantime (412)', async () => {
    const { page } = await openConsole();
    await page.getByRole('button', { name: 'Directory' }).click();
    await page.getByRole('button', { name: 'Add user' }).click();
    await page.getByRole('textbox', { name: 'Email' }).fill('ANNA@acme.example');
    await page.getByRole('button', { name: 'Save user' }).click();
    await page.getByRole('alert').filter({ hasText: 'Another user already has this email address.' }).waitFor();
    await noSeriousViolations(page, 'the user form refusing a duplicate email');
    await page.getByRole('button', { name: 'Cancel' }).click();

    await page.getByRole('searchbox', { name: 'Search users' }).fill('zoe@');
    await page.getByRole('button', { name: "Edit Zoë O'Brien" }).click();
    await page.getByRole('textbox', { name: 'First name' }).fill('Zoey');
    const changed = await t.app.inject({
      method: 'PATCH',
      url: '/admin/api/v3/organizations/acme/users/u4',
      headers: { authorization: ADMIN, 'content-type': 'application/merge-patch+json' },
      payload: { lastname: 'OBrien-Smith' },
    });
    assert.equal(changed.statusCode, 200, changed.body);
    await page.getByRole('button', { name: 'Save user' }).click();
    await page.getByRole('alert').filter({ hasText: 'Someone else changed this in the meantime' }).waitFor();
    await noSeriousViolations(page, 'the user form after a conflicting edit');
    assert.equal(await page.getByRole('textbox', { name: 'Last name' }).inputValue(), 'OBrien-Smith');
    assert.equal(await page.getByRole('textbox', { name: 'First name' }).inputValue(), 'Zoë');
    // Saving again, now at the current version, goes through.
    await page.getByRole('textbox', { name: 'First name' }).fill('Zoey');
    await page.getByRole('button', { name: 'Save user' }).click();
    await page.getByText('Saved Zoey OBrien-Smith.').waitFor();
    await page.context().close();
  });

  it('says so when the credential stops covering the organization that is open (403)', async () => {
    const { page, scriptErrors } = await openPage(browser, url);
    await signIn(page, 'narrowed-admin', 'narrowed-password');
    await expectStatus(page, `${await lookupTotal({})} signatories`);
    await page.getByRole('combobox', { name: 'Organization' }).selectOption({ label: 'Other Ltd' });
    await expectStatus(page, '1 signatory');
    // Another administrator narrows this credential to Acme while the console shows Other Ltd.
    await t.sql(sql`UPDATE credentials SET organizations = '["acme"]' WHERE username = 'narrowed-admin'`);
    await page.getByRole('searchbox', { name: 'Search signatories' }).fill('olga');
    await page.getByRole('alert').filter({ hasText: 'Your credential does not cover this organization.' }).waitFor();
    // The rows and count of the search before are not left standing as if they answered this one.
    await expectStatus(page, 'No signatories shown');
    assert.equal(await page.locator('tbody tr').count(), 0);
    await noSeriousViolations(page, 'the signing room view of an organization the credential no longer covers');
    assert.deepEqual(scriptErrors, []);
    await page.context().close();
  });

  it('shows the answer to the newest search when an older answer is slower', async () => {
    const { page, scriptErrors } = await openConsole();
    let released: Promise<void> | undefined;
    await page.route(/\/signatories\/lookup\?.*searchQuery=anna/, (route) => {
      released = new Promise<void>((resolve) => setTimeout(resolve, 1_500))
        // The console may have dropped the request by then: nothing is left to answer.
        .then(() => route.continue())
        .catch(() => undefined);
      return released;
    });
    const search = page.getByRole('searchbox', { name: 'Search signatories' });
    await search.fill('anna');
    while (released === undefined) await new Promise((resolve) => setTimeout(resolve, 20));
    await search.fill('person number1');
    await expectStatus(page, '10 signatories');
    await released;
    // The older, slower answer for "anna" has come and gone: the page still shows the newest.
    await new Promise((resolve) => setTimeout(resolve, 300));
    await expectStatus(page, '10 signatories');
    assert.equal((await names(page)).length, 10);
    assert.ok((await names(page)).every((name) => name.startsWith('Person Number1')));
    assert.deepEqual(scriptErrors, []);
    await page.context().close();
  });

  it('switches room, uploads a JPEG with the file picker and adds a user by keyboard alone', async () => {
    const { page, scriptErrors, foreignRequests } = await openPage(browser, url);
    await signInByKeyboard(page);

    const room = page.getByRole('combobox', { name: 'Room' });
    const before = await room.inputValue();
    await tabTo(page, room);
    await page.keyboard.press('ArrowDown');
    const chosen = await room.inputValue();
    assert.notEqual(chosen, before);
    await expectStatus(page, `${await lookupTotal({})} signatories`);

    const jpeg = await sharp({ create: { width: 60, height: 80, channels: 3, background: '#aa3311' } })
      .jpeg()
      .toBuffer();
    // Listening first: Playwright turns on Chromium's file chooser interception without waiting for
    // it, and a key press sent right behind could open the chooser before it is intercepted.
    const chooser = page.waitForEvent('filechooser');
    await tabTo(page, page.getByLabel('Upload document'));
    await page.keyboard.press('Space');
    await (await chooser).setFiles({ name: 'Photo of the signature.jpg', mimeType: 'image/jpeg', buffer: jpeg });
    await expectThumbnail(page, 'Photo of the signature.jpg');
    const listed = await t.app.inject({ url: `/admin/api/v3/organizations/acme/rooms/${chosen}/documents`, headers: { authorization: ADMIN } });
    assert.deepEqual(
      (listed.json().content as { name: string; mediaType: string }[]).map((document) => [document.name, document.mediaType]),
      [['Photo of the signature.jpg', 'image/jpeg']],
    );

    await tabTo(page, page.getByRole('button', { name: 'Directory' }));
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Users' }).waitFor();
    await tabTo(page, page.getByRole('button', { name: 'Add user' }));
    await page.keyboard.press('Enter');
    // The form opens with focus in its first field (after its first paint: Tab pressed before that
    // would race it).
    await expectFocused(page.getByRole('textbox', { name: 'First name' }));
    await page.keyboard.type('Kim');
    await tabTo(page, page.getByRole('textbox', { name: 'Last name' }));
    await page.keyboard.type('Keyboard');
    await tabTo(page, page.getByRole('textbox', { name: 'Email' }));
    await page.keyboard.type('kim@acme.example');
    await page.keyboard.press('Enter');
    await page.getByText('Added Kim Keyboard.').waitFor();
    const users = await t.app.inject({ url: '/admin/api/v3/organizations/acme/users?searchQuery=kim%40acme', headers: { authorization: ADMIN } });
    assert.deepEqual(
      (users.json().content as { firstname: string; lastname: string }[]).map((user) => `${user.firstname} ${user.lastname}`),
      ['Kim Keyboard'],
    );
    await noSeriousViolations(page, 'the directory view after adding a user by keyboard');
    assert.deepEqual(scriptErrors, []);
    assert.deepEqual(foreignRequests, []);
    await page.context().close();
  });

  it('works at 390 px wide and by keyboard alone', async () => {
    const { page, scriptErrors } = await openPage(browser, url, { width: 390, height: 844 });
    await signInByKeyboard(page);
    await page.getByRole('searchbox', { name: 'Search signatories' }).focus();
    await page.keyboard.type('anna');
    await expectStatus(page, `${await lookupTotal({ searchQuery: 'anna' })} signator(y|ies)`);
    // The console's own focus ring (3 px solid), not the browser's thin default.
    const focusRing = await page.evaluate(() => {
      const style = getComputedStyle(document.activeElement!);
      return { style: style.outlineStyle, width: parseFloat(style.outlineWidth) };
    });
    assert.equal(focusRing.style, 'solid');
    assert.ok(focusRing.width >= 2, `focus outline ${focusRing.width}px`);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    assert.ok(overflow <= 0, `the page scrolls sideways by ${overflow}px at 390px`);
    await noSeriousViolations(page, 'the signing room view at 390 px');
    await page.getByRole('button', { name: 'Directory' }).click();
    await page.getByRole('heading', { name: 'Users' }).waitFor();
    assert.ok((await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth)) <= 0);
    await noSeriousViolations(page, 'the directory view at 390 px');
    assert.deepEqual(scriptErrors, []);
    await page.context().close();
  });

  it('says when the server has gone away and recovers without a reload when it is back', async () => {
    const { page, scriptErrors } = await openConsole();
    const port = (t.app.server.address() as AddressInfo).port;
    await t.app.close();
    await page.getByRole('searchbox', { name: 'Search signatories' }).fill('person');
    await page.getByRole('alert').filter({ hasText: 'cannot be reached' }).waitFor();
    await noSeriousViolations(page, 'the signing room view while the server is away');
    const again = await buildApp(t.config);
    try {
      await again.listen({ host: '127.0.0.1', port });
      await page.getByRole('alert').filter({ hasText: 'cannot be reached' }).waitFor({ state: 'detached', timeout: 10_000 });
      await expectStatus(page, `${PEOPLE.length} signatories`);
      assert.deepEqual(scriptErrors, []);
    } finally {
      await page.context().close();
      await again.close();
    }
  });
});
