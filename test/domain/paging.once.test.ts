import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { effectivePageSize, pageJson, pageOffset, toPage } from '../../src/domain/paging.ts';

describe('paging', () => {
  it('clamps the size to the maximum', () => {
    assert.equal(effectivePageSize(5000, 2000), 2000);
    assert.equal(effectivePageSize(20, 2000), 20);
  });

  it('describes an empty result as one first and last page of nothing', () => {
    const page = toPage([], { page: 0, size: 20 }, 0);
    assert.equal(page.totalPages, 0);
    assert.equal(page.first, true);
    assert.equal(page.last, true);
    assert.equal(page.empty, true);
  });

  it('keeps the totals on a page past the end', () => {
    const page = toPage([], { page: 7, size: 10 }, 25);
    assert.deepEqual(
      { first: page.first, last: page.last, totalPages: page.totalPages, totalElements: page.totalElements, offset: page.pageable.offset },
      { first: false, last: true, totalPages: 3, totalElements: 25, offset: 70 },
    );
  });

  it('follows Spring Data arithmetic for any page', () => {
    fc.assert(
      fc.property(fc.nat(2_147_483_647), fc.integer({ min: 1, max: 2000 }), fc.nat(5_000_000), (page, size, total) => {
        const onPage = Math.max(0, Math.min(size, total - page * size));
        const result = toPage(new Array(onPage).fill(0), { page, size }, total);
        assert.equal(result.totalPages, Math.ceil(total / size));
        assert.equal(result.first, page === 0);
        assert.equal(result.last, page + 1 >= Math.ceil(total / size));
        assert.equal(result.numberOfElements, onPage);
        assert.equal(result.pageable.offset, pageOffset({ page, size }));
        assert.equal(result.pageable.offset, page * size);
        assert.deepEqual(result.sort, { empty: false, sorted: true, unsorted: false });
        assert.equal(result.pageable.paged && !result.pageable.unpaged, true);
      }),
    );
  });

  it("writes a page from its content's JSON byte for byte as the whole page turned into JSON", () => {
    const item = fc.record({ displayName: fc.string(), email: fc.string(), roomMember: fc.boolean(), lastname: fc.option(fc.string(), { nil: null }) });
    fc.assert(
      fc.property(fc.array(item, { maxLength: 30 }), fc.nat(1_000), fc.integer({ min: 1, max: 2000 }), fc.nat(5_000_000), (content, page, size, total) => {
        const request = { page, size };
        assert.equal(pageJson(JSON.stringify(content), content.length, request, total), JSON.stringify(toPage(content, request, total)));
      }),
    );
  });
});
