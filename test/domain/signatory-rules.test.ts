import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { displayName, needsInvitation, requiresInvitation, signatoryFilter, sortKeyOrder } from '../../src/domain/signatory-rules.ts';

describe('signatoryFilter', () => {
  it('maps each purpose to its candidates', () => {
    assert.deepEqual(signatoryFilter({ purpose: 'SIGNING_REQUEST_SIGNATORY' }), { roomMember: true });
    assert.deepEqual(signatoryFilter({ purpose: 'SIGNATORY_INVITATION' }), { roomMember: false });
    assert.deepEqual(signatoryFilter({ purpose: 'PERMISSION_INVITATION' }), { roomMember: false, external: false });
    assert.deepEqual(signatoryFilter({ purpose: 'SIGNING_REQUEST_DELIVERY_RECIPIENT' }), {});
  });
  it('ignores the deprecated flags when a purpose is given', () => {
    assert.deepEqual(
      signatoryFilter({ purpose: 'SIGNING_REQUEST_DELIVERY_RECIPIENT', roomMember: true, requiresInvitation: false }),
      {},
    );
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
