import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { DIRECTORY } from '../helpers/fixtures.ts';
import { addApiToken, startTestApp, type TestApp } from '../helpers/test-app.ts';

const SCIM = '/scim/v2/organizations/acme';
const PATCH_OP = 'urn:ietf:params:scim:api:messages:2.0:PatchOp';

/** What the test expects of a user: the attributes a PATCH may change. */
interface Model {
  givenName: string | undefined;
  familyName: string | undefined;
  email: string;
  active: boolean;
  externalId: string | undefined;
}

type Step = { operation: Record<string, unknown>; apply: (model: Model) => void };

const name = fc.constantFrom('Ada', 'Émile', 'Zoë', 'Ōta', 'de la Cruz', "O'Neil");
const bool = fc.boolean();
/** Each step: one operation in a form Entra ID or Okta sends, and what it does to the model. */
const stepArb: fc.Arbitrary<Step> = fc.oneof(
  fc
    .tuple(name, fc.constantFrom('Replace', 'replace', 'Add'))
    .map(([value, op]): Step => ({ operation: { op, path: 'name.givenName', value }, apply: (m) => void (m.givenName = value) })),
  fc
    .tuple(name, fc.constantFrom('replace', 'Replace'))
    .map(([value, op]): Step => ({ operation: { op, value: { 'name.familyName': value } }, apply: (m) => void (m.familyName = value) })),
  fc.constant<Step>({ operation: { op: 'remove', path: 'name.givenName' }, apply: (m) => void (m.givenName = undefined) }),
  fc.tuple(bool, fc.boolean()).map(([value, asString]): Step => ({
    operation: { op: asString ? 'Replace' : 'replace', path: 'active', value: asString ? (value ? 'True' : 'False') : value },
    apply: (m) => void (m.active = value),
  })),
  bool.map((value): Step => ({ operation: { op: 'replace', value: { active: value } }, apply: (m) => void (m.active = value) })),
  fc.nat(999).map((n): Step => ({
    operation: { op: 'Add', path: 'emails[type eq "work"].value', value: `model.${n}@acme.example` },
    apply: (m) => void (m.email = `model.${n}@acme.example`),
  })),
  fc.nat(99).map((n): Step => ({ operation: { op: 'replace', path: 'externalId', value: `ext-${n}` }, apply: (m) => void (m.externalId = `ext-${n}`) })),
  fc.constant<Step>({ operation: { op: 'Replace', path: 'displayName', value: 'Entra writes this; it is ignored' }, apply: () => undefined }),
  // Names in any case, and a pathless value naming `name` whole: the sub-attribute it leaves out stays.
  fc
    .tuple(name, fc.constantFrom('name.givenName', 'Name.GivenName', 'NAME.GIVENNAME'))
    .map(([value, path]): Step => ({ operation: { op: 'replace', path, value }, apply: (m) => void (m.givenName = value) })),
  fc
    .tuple(name, fc.constantFrom('add', 'Replace'))
    .map(([value, op]): Step => ({ operation: { op, value: { Name: { FamilyName: value } } }, apply: (m) => void (m.familyName = value) })),
  fc.tuple(bool, fc.constantFrom('Active', 'ACTIVE')).map(([value, path]): Step => ({
    operation: { op: 'Replace', path, value: value ? 'True' : 'False' },
    apply: (m) => void (m.active = value),
  })),
);

/**
 * A property test (issue: SCIM provisioning): random sequences of SCIM PATCH operations, in the
 * forms identity providers send, leave the user as an in-test model of their meaning says, read
 * back through SCIM and through the REST API.
 */
describe('SCIM PATCH against a model', () => {
  let t: TestApp;
  let token: string;
  const call = (method: 'GET' | 'POST' | 'PATCH', url: string, body?: unknown) =>
    t.app.inject({
      method,
      url,
      headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/scim+json' } : {}) },
      ...(body !== undefined ? { payload: JSON.stringify(body) } : {}),
    });

  before(async () => {
    t = await startTestApp();
    await t.importDirectory(DIRECTORY);
    ({ secret: token } = await addApiToken(t, 'acme'));
  });
  after(async () => t.close());

  it('leaves every user as the model says after each sequence', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(fc.array(stepArb, { minLength: 1, maxLength: 3 }), { minLength: 1, maxLength: 6 }), async (patches) => {
        run += 1;
        const userName = `model-user-${run}@acme.example`;
        const created = await call('POST', `${SCIM}/Users`, {
          schemas: ['urn:ietf:params:scim:schemas:core:2.0:User'],
          userName,
          name: { givenName: 'Start', familyName: 'Model' },
          emails: [{ value: userName, primary: true }],
        });
        assert.equal(created.statusCode, 201, created.body);
        const id = created.json().id as string;
        const model: Model = { givenName: 'Start', familyName: 'Model', email: userName, active: true, externalId: undefined };
        for (const steps of patches) {
          const response = await call('PATCH', `${SCIM}/Users/${id}`, { schemas: [PATCH_OP], Operations: steps.map((step) => step.operation) });
          // Another model user may hold the email already: the whole PATCH is refused, and nothing changes.
          if (response.statusCode === 409) continue;
          assert.equal(response.statusCode, 200, response.body);
          for (const step of steps) step.apply(model);
        }
        const user = (await call('GET', `${SCIM}/Users/${id}`)).json();
        assert.deepEqual(
          { givenName: user.name.givenName, familyName: user.name.familyName, email: user.emails[0].value, active: user.active, externalId: user.externalId },
          model,
        );
        assert.equal(user.userName, userName, 'no operation changed the userName');
        const rest = (await t.app.inject({ url: `/admin/api/v3/organizations/acme/users/${id}`, headers: { authorization: `Bearer ${token}` } })).json();
        assert.equal(rest.status, model.active ? 'active' : 'suspended');
        assert.equal(rest.firstname, model.givenName ?? null);
      }),
      { numRuns: 40 },
    );
  });
});
