import { useState } from 'preact/hooks';
import { query, segment, type ApiClient, type Page, type Signatory } from './api.ts';
import { countText, messageFor } from './messages.ts';
import { SearchField } from './search-field.tsx';
import { useDebounced, useLoaded } from './use-api.ts';

/** The lookup's purposes (contract section 3): values are the API's names, labels are for people. */
const PURPOSES = [
  { value: 'SIGNING_REQUEST_DELIVERY_RECIPIENT', label: 'Anyone who can receive a signing request' },
  { value: 'SIGNING_REQUEST_SIGNATORY', label: 'Signatories: members of this room' },
  { value: 'SIGNATORY_INVITATION', label: 'People to invite as signatories (not members)' },
  { value: 'PERMISSION_INVITATION', label: 'People to invite with permissions (internal, not members)' },
] as const;

/** Keystrokes settle this long before the lookup is asked: well inside the one-second promise. */
const SEARCH_DEBOUNCE_MS = 200;
const PAGE_SIZE = 20;

/** Name sorts by first name, as the column reads (display name: first name first). */
type SortField = 'firstname' | 'email';
type Sort = { by: SortField; direction: 'ASC' | 'DESC' } | undefined;

interface Props {
  client: ApiClient;
  organizationId: string;
  roomId: string;
  generation: number;
}

export function SignatoriesPanel({ client, organizationId, roomId, generation }: Props) {
  const [search, setSearch] = useState('');
  const [purpose, setPurpose] = useState<string>(PURPOSES[0].value);
  const [sort, setSort] = useState<Sort>();
  const searchQuery = useDebounced(search.trim(), SEARCH_DEBOUNCE_MS);
  // A page belongs to the query it was chosen for: a new query starts at its first page.
  const [chosenPage, setChosenPage] = useState({ page: 0, forQuery: '' });
  const page = chosenPage.forQuery === searchQuery ? chosenPage.page : 0;
  const setPage = (next: number) => setChosenPage({ page: next, forQuery: searchQuery });
  const result = useLoaded(
    (signal) =>
      client.json<Page<Signatory>>(
        `/organizations/${segment(organizationId)}/rooms/${segment(roomId)}/signatories/lookup${query({
          searchQuery,
          purpose,
          page,
          size: PAGE_SIZE,
          sortBy: sort?.by,
          sortDirection: sort?.direction,
        })}`,
        { signal },
      ),
    [client, organizationId, roomId, searchQuery, purpose, page, sort?.by, sort?.direction, generation],
  );
  const data = result.data;
  // Until the answer for what is in the box arrives, the count shown would be the last query's; once
  // its request has failed, the last query's rows are not shown as if they answered it.
  const failed = search.trim() === searchQuery && result.failed;
  const pending = search.trim() !== searchQuery || !result.current;

  function sortBy(field: SortField) {
    setSort(sort?.by === field && sort.direction === 'ASC' ? { by: field, direction: 'DESC' } : { by: field, direction: 'ASC' });
    setPage(0);
  }

  function ariaSort(field: SortField): 'ascending' | 'descending' | undefined {
    if (sort?.by !== field) return undefined;
    return sort.direction === 'ASC' ? 'ascending' : 'descending';
  }

  function header(field: SortField, label: string) {
    const state = ariaSort(field);
    return (
      <th scope="col" aria-sort={state ?? 'none'} class="sortable" onClick={(event) => event.target === event.currentTarget && sortBy(field)}>
        <button type="button" class="sort" onClick={() => sortBy(field)}>
          {label}
          <span aria-hidden="true" class="arrow">
            {state === 'ascending' ? '▲' : state === 'descending' ? '▼' : '↕'}
          </span>
        </button>
      </th>
    );
  }

  return (
    <section aria-labelledby="signatories-heading" class="panel">
      <h2 id="signatories-heading">Signatories</h2>
      <div class="filters">
        <SearchField id="signatory-search" label="Search signatories" value={search} onInput={setSearch} />
        <div class="field">
          <label for="purpose">Purpose</label>
          <select
            id="purpose"
            value={purpose}
            onChange={(event) => {
              setPurpose(event.currentTarget.value);
              setPage(0);
            }}
          >
            {PURPOSES.map((option) => (
              <option key={option.value} value={option.value}>
                {option.label}
              </option>
            ))}
          </select>
        </div>
      </div>
      <p role="status" aria-live="polite" class="count">
        {failed
          ? 'No signatories shown'
          : data === undefined
            ? 'Loading signatories…'
            : pending
              ? 'Searching…'
              : countText(data.totalElements, 'signatory', 'signatories')}
      </p>
      {result.error !== undefined && (
        <p role="alert" class="error">
          {messageFor(result.error, 'load')}
        </p>
      )}
      <div class="table-scroll" role="region" aria-labelledby="signatories-heading" tabindex={0}>
        <table aria-busy={result.loading}>
          <caption class="visually-hidden">
            Signatories of the room, {sort === undefined ? 'by last name' : `sorted by ${sort.by === 'email' ? 'email' : 'first name'} ${ariaSort(sort.by)}`}
          </caption>
          <thead>
            <tr>
              {header('firstname', 'Name')}
              {header('email', 'Email')}
              <th scope="col">Room member</th>
              <th scope="col">Requires invitation</th>
            </tr>
          </thead>
          <tbody>
            {(failed ? [] : (data?.content ?? [])).map((signatory) => (
              <tr key={signatory.email}>
                <td>{signatory.displayName}</td>
                <td class="email">{signatory.email}</td>
                <td>{signatory.roomMember ? 'Yes' : 'No'}</td>
                <td>{signatory.requiresInvitation ? 'Yes' : 'No'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <Pager page={page} totalPages={failed ? 0 : (data?.totalPages ?? 0)} onPage={setPage} />
    </section>
  );
}

export function Pager({ page, totalPages, onPage }: { page: number; totalPages: number; onPage: (page: number) => void }) {
  return (
    <div class="pager">
      <button type="button" disabled={page === 0} onClick={() => onPage(page - 1)}>
        Previous page
      </button>
      <span>
        Page {page + 1} of {Math.max(totalPages, 1)}
      </span>
      <button type="button" disabled={page + 1 >= totalPages} onClick={() => onPage(page + 1)}>
        Next page
      </button>
    </div>
  );
}
