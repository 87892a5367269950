import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  countFromTallies,
  displayName,
  matchesFilter,
  needsInvitation,
  requiresInvitation,
  signatoryFilter,
  sortKeyOrder,
  type Tally,
} from '../../src/domain/signatory-rules.ts';

describe('signatoryFilter', () => {
  it('maps each purpose to its candidates', () => {
    assert.deepEqual(signatoryFilter({ purpose: 'SIGNING_REQUEST_SIGNATORY' }), { roomMember: true });
    assert.deepEqual(signatoryFilter({ purpose: 'SIGNATORY_INVITATION' }), { roomMember: false });
    assert.deepEqual(signatoryFilter({ purpose: 'PERMISSION_INVITATION' }), { roomMember: false, external: false });
    assert.deepEqual(signatoryFilter({ purpose: 'SIGNING_REQUEST_DELIVERY_RECIPIENT' }), {});
  });
  it('ignores the deprecated flags when a purpose is given', () => {
    assert.deepEqual(signatoryFilter({ purpose: 'SIGNING_REQUEST_DELIVERY_RECIPIENT', roomMember: true, requiresInvitation: false }), {});
  });
  it('uses the deprecated flags without a purpose', () => {
    assert.deepEqual(signatoryFilter({ roomMember: false }), { roomMember: false });
    assert.deepEqual(signatoryFilter({ requiresInvitation: true }), { requiresInvitation: true });
    assert.deepEqual(signatoryFilter({}), {});
  });
});

describe('invitation rules', () => {
  it('needs an invitation when external or pending', () => {
    assert.equal(needsInvitation({ external: false, status: 'active' }), false);
    assert.equal(needsInvitation({ external: true, status: 'active' }), true);
    assert.equal(needsInvitation({ external: false, status: 'pending' }), true);
  });
  it('never requires an invitation of a room member', () => {
    assert.equal(requiresInvitation(true, true), false);
    assert.equal(requiresInvitation(false, true), true);
    assert.equal(requiresInvitation(false, false), false);
  });
});

describe('displayName', () => {
  it('joins the names with one space, leaving nulls out', () => {
    assert.equal(displayName({ firstname: 'Anna', lastname: 'Müller', email: 'a@x' }), 'Anna Müller');
    assert.equal(displayName({ firstname: null, lastname: 'Müller', email: 'a@x' }), 'Müller');
    assert.equal(displayName({ firstname: 'Anna', lastname: '', email: 'a@x' }), 'Anna');
  });
  it('falls back to the email', () => {
    assert.equal(displayName({ firstname: null, lastname: null, email: 'a@x' }), 'a@x');
    assert.equal(displayName({ firstname: '', lastname: '', email: 'a@x' }), 'a@x');
  });
});

describe('sortKeyOrder', () => {
  it('puts the sort field first, then lastname, firstname, email', () => {
    assert.deepEqual(sortKeyOrder('lastname'), ['lastname', 'firstname', 'email']);
    assert.deepEqual(sortKeyOrder('firstname'), ['firstname', 'lastname', 'email']);
    assert.deepEqual(sortKeyOrder('email'), ['email', 'lastname', 'firstname']);
  });
});

describe('countFromTallies', () => {
  it('counts what testing each user would count, for every filter, suspended users never', () => {
    const user = fc.record({ external: fc.boolean(), pending: fc.boolean(), member: fc.boolean(), suspended: fc.boolean() });
    const filter = fc.record({ roomMember: fc.boolean(), requiresInvitation: fc.boolean(), external: fc.constant(false as const) }, { requiredKeys: [] });
    fc.assert(
      fc.property(fc.array(user, { maxLength: 60 }), filter, fc.boolean(), (users, wanted, includeExternal) => {
        const kinds = users.map((u) => ({ external: u.external, needsInvitation: u.external || u.pending, roomMember: u.member, candidate: !u.suspended }));
        const expected = kinds.filter((kind) => kind.candidate && matchesFilter(kind, includeExternal, wanted)).length;
        const tally = (list: typeof kinds): Tally[] => {
          const counts = new Map<string, Tally>();
          for (const kind of list) {
            const key = `${kind.external}/${kind.needsInvitation}/${kind.candidate}`;
            const entry = counts.get(key) ?? { external: kind.external, needsInvitation: kind.needsInvitation, candidate: kind.candidate, users: 0 };
            entry.users += 1;
            counts.set(key, entry);
          }
          return [...counts.values()];
        };
        const counted = countFromTallies(tally(kinds), tally(kinds.filter((kind) => kind.roomMember)), includeExternal, wanted);
        assert.equal(counted, expected);
      }),
      { numRuns: 500 },
    );
  });

  it('tests a user as the contract says', () => {
    const member = { external: false, needsInvitation: true, roomMember: true };
    const invitee = { external: false, needsInvitation: true, roomMember: false };
    const outsider = { external: true, needsInvitation: true, roomMember: false };
    assert.equal(matchesFilter(member, true, { requiresInvitation: true }), false);
    assert.equal(matchesFilter(invitee, true, { requiresInvitation: true }), true);
    assert.equal(matchesFilter(outsider, false, {}), false);
    assert.equal(matchesFilter(outsider, true, { roomMember: false, external: false }), false);
    assert.equal(matchesFilter(outsider, true, { roomMember: false }), true);
  });
});
