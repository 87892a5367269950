import { Type, type TSchema } from 'typebox';

const SortObject = Type.Object({ empty: Type.Boolean(), sorted: Type.Boolean(), unsorted: Type.Boolean() });

/** The Spring Data page shape around items of the given schema. */
export function pageOf<T extends TSchema>(item: T, options: { title: string; description: string }) {
  return Type.Object(
    {
      content: Type.Array(item),
      empty: Type.Boolean(),
      first: Type.Boolean(),
      last: Type.Boolean(),
      number: Type.Integer({ description: 'Zero-based page index' }),
      numberOfElements: Type.Integer(),
      size: Type.Integer({ description: 'Effective page size' }),
      totalElements: Type.Integer(),
      totalPages: Type.Integer(),
      sort: SortObject,
      pageable: Type.Object({
        offset: Type.Integer(),
        pageNumber: Type.Integer(),
        pageSize: Type.Integer(),
        paged: Type.Boolean(),
        unpaged: Type.Boolean(),
        sort: SortObject,
      }),
    },
    options,
  );
}

/** The `page` and `size` query parameters shared by every paged route. */
export const PageQuery = {
  page: Type.Optional(Type.Integer({ format: 'int32', minimum: 0, default: 0, description: 'Zero-based page index' })),
  size: Type.Optional(
    Type.Integer({
      format: 'int32',
      minimum: 1,
      default: 2000,
      description: 'Items per page; values above the maximum page size (SIGNROOM_MAX_PAGE_SIZE) are clamped to it',
    }),
  ),
};
