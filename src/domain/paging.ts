/** Spring Data page arithmetic (contract section 3), as pure functions. */

export interface PageRequest {
  /** Zero-based page index. */
  page: number;
  /** Effective page size, already clamped to the maximum. */
  size: number;
}

/** The page size actually used: the requested one clamped to the maximum (Spring's convention). */
export function effectivePageSize(requested: number, maxPageSize: number): number {
  return Math.min(requested, maxPageSize);
}

/** Row offset of the first element of a page. */
export function pageOffset(request: PageRequest): number {
  return request.page * request.size;
}

export interface SortDescription {
  empty: boolean;
  sorted: boolean;
  unsorted: boolean;
}

export interface Page<T> {
  content: T[];
  empty: boolean;
  first: boolean;
  last: boolean;
  number: number;
  numberOfElements: number;
  size: number;
  totalElements: number;
  totalPages: number;
  sort: SortDescription;
  pageable: {
    offset: number;
    pageNumber: number;
    pageSize: number;
    paged: boolean;
    unpaged: boolean;
    sort: SortDescription;
  };
}

const SORTED: SortDescription = { empty: false, sorted: true, unsorted: false };

/** Wraps one page of results in the Spring Data page shape. */
export function toPage<T>(content: T[], request: PageRequest, totalElements: number): Page<T> {
  return { content, ...pageAround(content.length, request, totalElements) };
}

/**
 * The JSON of `toPage(content, request, totalElements)`, byte for byte, from the JSON of its
 * content (an array of `count` items): a page whose items stay as they were while its total moves
 * (steady writes elsewhere in the directory) is not turned into JSON again.
 */
export function pageJson(contentJson: string, count: number, request: PageRequest, totalElements: number): string {
  // JSON.stringify writes an object's members in the order toPage makes them: content first.
  return `{"content":${contentJson},${JSON.stringify(pageAround(count, request, totalElements)).slice(1)}`;
}

/** Everything of a page but its content, which holds `count` items. */
function pageAround(count: number, request: PageRequest, totalElements: number): Omit<Page<never>, 'content'> {
  const totalPages = Math.ceil(totalElements / request.size);
  return {
    empty: count === 0,
    first: request.page === 0,
    last: request.page + 1 >= totalPages,
    number: request.page,
    numberOfElements: count,
    size: request.size,
    totalElements,
    totalPages,
    sort: { ...SORTED },
    pageable: {
      offset: pageOffset(request),
      pageNumber: request.page,
      pageSize: request.size,
      paged: true,
      unpaged: false,
      sort: { ...SORTED },
    },
  };
}
