import { useRef, useState } from 'preact/hooks';
import { ApiError, query, segment, type ApiClient, type Page, type Room, type User, type UserStatus } from './api.ts';
import { messageFor } from './messages.ts';
import { Pager } from './signatories-panel.tsx';
import { useDebounced, useLoaded } from './use-api.ts';
import { SearchField } from './search-field.tsx';
import { UserForm, type UserDraft } from './user-form.tsx';

const PAGE_SIZE = 20;
/** Adding a member by email reads the users whose email or name contains it, this many at a time (the API's largest page), at most this many pages. */
const FIND_USER_PAGE_SIZE = 2000;
const FIND_USER_PAGES = 5;

interface Props {
  client: ApiClient;
  organizationId: string;
  /** The room chosen in the header: its members are managed here. */
  room: Room | undefined;
  generation: number;
  onRoomsChanged: () => void;
}

export function displayName(user: Pick<User, 'firstname' | 'lastname' | 'email'>): string {
  const name = [user.firstname, user.lastname].filter((part) => part !== null && part !== '').join(' ');
  return name === '' ? user.email : name;
}

/** A directory action refused before the API is asked: its message is shown as it is. */
class Refusal extends Error {}

/** One place for the outcome of a directory action: a status sentence or an alert. */
function useOutcome() {
  const [done, setDone] = useState<string | undefined>();
  const [problem, setProblem] = useState<string | undefined>();
  const failed = (error: unknown, task: 'save' | 'delete' | 'load' = 'save') => {
    setDone(undefined);
    setProblem(error instanceof ApiError ? messageFor(error, task) : error instanceof Refusal ? error.message : 'Something went wrong.');
  };
  return {
    done,
    problem,
    failed,
    succeeded(message: string) {
      setProblem(undefined);
      setDone(message);
    },
    clear() {
      setDone(undefined);
      setProblem(undefined);
    },
    /** Runs an action whose success is the sentence it returns; says what came of it, and whether it succeeded. */
    async attempt(action: () => Promise<string>, task: 'save' | 'delete' = 'save'): Promise<boolean> {
      setDone(undefined);
      setProblem(undefined);
      try {
        const message = await action();
        setDone(message);
        return true;
      } catch (error) {
        failed(error, task);
        return false;
      }
    },
  };
}

function Outcome({ outcome }: { outcome: ReturnType<typeof useOutcome> }) {
  return (
    <>
      <div aria-live="polite">{outcome.done !== undefined && <p class="ok">{outcome.done}</p>}</div>
      {outcome.problem !== undefined && (
        <p role="alert" class="error">
          {outcome.problem}
        </p>
      )}
    </>
  );
}

export function DirectoryView({ client, organizationId, room, generation, onRoomsChanged }: Props) {
  // Members come and go from both panels (a user deleted leaves every room): the rooms' counts and the members shown follow.
  const [membersVersion, setMembersVersion] = useState(0);
  const membersChanged = () => setMembersVersion((value) => value + 1);
  return (
    <div class="directory-view">
      <UsersPanel client={client} organizationId={organizationId} generation={generation} onMembersChanged={membersChanged} />
      <RoomsPanel client={client} organizationId={organizationId} generation={generation + membersVersion} onRoomsChanged={onRoomsChanged} />
      {room !== undefined && (
        <MembersPanel
          key={room.id}
          client={client}
          organizationId={organizationId}
          room={room}
          generation={generation + membersVersion}
          onRoomsChanged={() => {
            membersChanged();
            onRoomsChanged();
          }}
        />
      )}
    </div>
  );
}

type Editing = { mode: 'add' } | { mode: 'edit'; user: User; etag: string; notice?: string } | undefined;

function UsersPanel({
  client,
  organizationId,
  generation,
  onMembersChanged,
}: {
  client: ApiClient;
  organizationId: string;
  generation: number;
  onMembersChanged: () => void;
}) {
  const users = `/organizations/${segment(organizationId)}/users`;
  const [search, setSearch] = useState('');
  const [status, setStatus] = useState<'' | UserStatus>('');
  const [page, setPage] = useState(0);
  const [version, setVersion] = useState(0);
  const [editing, setEditing] = useState<Editing>();
  const heading = useRef<HTMLHeadingElement>(null);
  const addButton = useRef<HTMLButtonElement>(null);
  const outcome = useOutcome();
  const searchQuery = useDebounced(search.trim(), 200);
  const list = useLoaded(
    (signal) => client.json<Page<User>>(`${users}${query({ searchQuery, status, page, size: PAGE_SIZE })}`, { signal }),
    [client, users, searchQuery, status, page, version, generation],
  );
  const refresh = () => setVersion((value) => value + 1);

  async function edit(user: User) {
    outcome.clear();
    try {
      const current = await client.tagged<User>(`${users}/${segment(user.id)}`);
      setEditing({ mode: 'edit', user: current.body, etag: current.etag });
    } catch (error) {
      outcome.failed(error, 'load');
      refresh();
    }
  }

  async function save(draft: UserDraft) {
    outcome.clear();
    try {
      if (editing?.mode === 'edit') {
        await client.json(`${users}/${segment(editing.user.id)}`, {
          method: 'PATCH',
          body: draft,
          contentType: 'application/merge-patch+json',
          ifMatch: editing.etag,
        });
        outcome.succeeded(`Saved ${displayName(draft)}.`);
      } else {
        await client.json(users, { method: 'POST', body: draft });
        outcome.succeeded(`Added ${displayName(draft)}.`);
      }
      closeForm();
      refresh();
    } catch (error) {
      // A stale edit: show what is stored now, and say so, rather than overwrite someone else's change.
      if (error instanceof ApiError && error.status === 412 && editing?.mode === 'edit') {
        try {
          const current = await client.tagged<User>(`${users}/${segment(editing.user.id)}`);
          setEditing({ mode: 'edit', user: current.body, etag: current.etag, notice: messageFor(error, 'save') });
          refresh();
          return;
        } catch (reloadError) {
          outcome.failed(reloadError, 'load');
          setEditing(undefined);
          refresh();
          return;
        }
      }
      throw error;
    }
  }

  /** Closes the user form; focus goes back to "Add user", which the form kept disabled. */
  function closeForm() {
    setEditing(undefined);
    requestAnimationFrame(() => addButton.current?.focus());
  }

  async function setUserStatus(user: User, next: UserStatus) {
    await outcome.attempt(async () => {
      await client.json(`${users}/${segment(user.id)}`, { method: 'PATCH', body: { status: next }, contentType: 'application/merge-patch+json' });
      return next === 'suspended' ? `Suspended ${displayName(user)}.` : `Reactivated ${displayName(user)}.`;
    });
    refresh();
    onMembersChanged();
  }

  async function remove(user: User) {
    await outcome.attempt(async () => {
      await client.noContent(`${users}/${segment(user.id)}`, { method: 'DELETE' });
      return `Deleted ${displayName(user)}.`;
    }, 'delete');
    refresh();
    onMembersChanged();
    // The row and its buttons are gone: focus goes to the list's heading.
    heading.current?.focus();
  }

  const data = list.data;
  return (
    <section aria-labelledby="users-heading" class="panel">
      <h2 id="users-heading" ref={heading} tabIndex={-1}>
        Users
      </h2>
      <div class="filters">
        <SearchField
          id="user-search"
          label="Search users"
          value={search}
          onInput={(value) => {
            setSearch(value);
            setPage(0);
          }}
        />
        <div class="field">
          <label for="user-status">Status</label>
          <select
            id="user-status"
            value={status}
            onChange={(event) => {
              setStatus(event.currentTarget.value as '' | UserStatus);
              setPage(0);
            }}
          >
            <option value="">Any status</option>
            <option value="active">Active</option>
            <option value="pending">Pending</option>
            <option value="suspended">Suspended</option>
          </select>
        </div>
        <button ref={addButton} type="button" class="align-end" onClick={() => setEditing({ mode: 'add' })} disabled={editing !== undefined}>
          Add user
        </button>
      </div>
      {editing !== undefined && (
        <UserForm
          key={editing.mode === 'edit' ? `${editing.user.id}@${editing.etag}` : 'new'}
          heading={editing.mode === 'edit' ? `Edit ${displayName(editing.user)}` : 'Add a user'}
          initial={editing.mode === 'edit' ? editing.user : undefined}
          notice={editing.mode === 'edit' ? editing.notice : undefined}
          onSave={save}
          onCancel={closeForm}
        />
      )}
      <Outcome outcome={outcome} />
      {list.error !== undefined && (
        <p role="alert" class="error">
          {messageFor(list.error, 'load')}
        </p>
      )}
      <p aria-live="polite" class="count">
        {data !== undefined ? (data.totalElements === 1 ? '1 user' : `${data.totalElements} users`) : 'Loading users…'}
      </p>
      <div class="table-scroll" role="region" aria-labelledby="users-heading" tabindex={0}>
        <table>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Email</th>
              <th scope="col">Status</th>
              <th scope="col">External</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {(data?.content ?? []).map((user) => (
              <tr key={user.id}>
                <td>{displayName(user)}</td>
                <td class="email">{user.email}</td>
                <td>{user.status}</td>
                <td>{user.external ? 'Yes' : 'No'}</td>
                <td class="actions">
                  <button type="button" class="small" aria-label={`Edit ${displayName(user)}`} onClick={() => void edit(user)}>
                    Edit
                  </button>
                  {user.status === 'suspended' ? (
                    <button
                      type="button"
                      class="small secondary"
                      aria-label={`Reactivate ${displayName(user)}`}
                      onClick={() => void setUserStatus(user, 'active')}
                    >
                      Reactivate
                    </button>
                  ) : (
                    <button
                      type="button"
                      class="small secondary"
                      aria-label={`Suspend ${displayName(user)}`}
                      onClick={() => void setUserStatus(user, 'suspended')}
                    >
                      Suspend
                    </button>
                  )}
                  <button type="button" class="small danger" aria-label={`Delete ${displayName(user)}`} onClick={() => void remove(user)}>
                    Delete
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <Pager page={page} totalPages={data?.totalPages ?? 0} onPage={setPage} />
    </section>
  );
}

function RoomsPanel({
  client,
  organizationId,
  generation,
  onRoomsChanged,
}: {
  client: ApiClient;
  organizationId: string;
  generation: number;
  onRoomsChanged: () => void;
}) {
  const rooms = `/organizations/${segment(organizationId)}/rooms`;
  const [name, setName] = useState('');
  const [id, setId] = useState('');
  const [version, setVersion] = useState(0);
  const outcome = useOutcome();
  const list = useLoaded((signal) => client.all<Room>(rooms, signal), [client, rooms, version, generation]);

  async function create(event: Event) {
    event.preventDefault();
    const created = await outcome.attempt(async () => {
      const room = await client.json<Room>(rooms, { method: 'POST', body: { name: name.trim(), ...(id.trim() !== '' ? { id: id.trim() } : {}) } });
      return `Created the room “${room.name}”.`;
    });
    if (!created) return;
    setName('');
    setId('');
    setVersion((value) => value + 1);
    onRoomsChanged();
  }

  async function remove(room: Room) {
    await outcome.attempt(async () => {
      await client.noContent(`${rooms}/${segment(room.id)}`, { method: 'DELETE' });
      return `Deleted the room “${room.name}”.`;
    }, 'delete');
    setVersion((value) => value + 1);
    onRoomsChanged();
  }

  return (
    <section aria-labelledby="rooms-heading" class="panel">
      <h2 id="rooms-heading">Signing rooms</h2>
      <form class="filters" onSubmit={(event) => void create(event)}>
        <div class="field grow">
          <label for="room-name">Room name</label>
          <input id="room-name" required maxLength={255} value={name} onInput={(event) => setName(event.currentTarget.value)} />
        </div>
        <div class="field">
          <label for="room-id">Room id (optional)</label>
          <input
            id="room-id"
            pattern="[A-Za-z0-9._\-]{1,64}"
            title="Letters, digits, dot, underscore or hyphen; at most 64"
            value={id}
            onInput={(event) => setId(event.currentTarget.value)}
          />
        </div>
        <button type="submit" class="align-end">
          Create room
        </button>
      </form>
      <Outcome outcome={outcome} />
      {list.error !== undefined && (
        <p role="alert" class="error">
          {messageFor(list.error, 'load')}
        </p>
      )}
      <ul class="room-list">
        {(list.data ?? []).map((room) => (
          <li key={room.id}>
            <span>
              <strong>{room.name}</strong>{' '}
              <span class="hint">
                ({room.id}) · {room.memberCount === 1 ? '1 member' : `${room.memberCount} members`}
              </span>
            </span>
            <button type="button" class="small danger" aria-label={`Delete room ${room.name}`} onClick={() => void remove(room)}>
              Delete
            </button>
          </li>
        ))}
      </ul>
    </section>
  );
}

function MembersPanel({
  client,
  organizationId,
  room,
  generation,
  onRoomsChanged,
}: {
  client: ApiClient;
  organizationId: string;
  room: Room;
  generation: number;
  onRoomsChanged: () => void;
}) {
  const organization = `/organizations/${segment(organizationId)}`;
  const members = `${organization}/rooms/${segment(room.id)}/members`;
  const [page, setPage] = useState(0);
  const [who, setWho] = useState('');
  const [version, setVersion] = useState(0);
  const outcome = useOutcome();
  const heading = useRef<HTMLHeadingElement>(null);
  const list = useLoaded(
    (signal) => client.json<Page<User>>(`${members}${query({ page, size: PAGE_SIZE })}`, { signal }),
    [client, members, page, version, generation],
  );
  const changed = () => {
    setVersion((value) => value + 1);
    onRoomsChanged();
  };

  /** The user an administrator means by an email address or a user id. */
  async function findUser(text: string): Promise<User | undefined> {
    // Every user whose email or name contains the text matches the search: the one whose email it is may be far down.
    for (let page = 0; page < FIND_USER_PAGES; page++) {
      const matches = await client.json<Page<User>>(`${organization}/users${query({ searchQuery: text, sortBy: 'email', size: FIND_USER_PAGE_SIZE, page })}`);
      const byEmail = matches.content.find((user) => user.email.toLowerCase() === text.toLowerCase());
      if (byEmail !== undefined) return byEmail;
      if (matches.last) break;
    }
    try {
      return await client.json<User>(`${organization}/users/${segment(text)}`);
    } catch (error) {
      if (error instanceof ApiError && (error.status === 404 || error.status === 400)) return undefined;
      throw error;
    }
  }

  async function add(event: Event) {
    event.preventDefault();
    const text = who.trim();
    const added = await outcome.attempt(async () => {
      const user = await findUser(text);
      if (user === undefined) throw new Refusal(`No user of this organization has the email address or user id “${text}”.`);
      await client.noContent(`${members}/${segment(user.id)}`, { method: 'PUT' });
      return `Added ${displayName(user)} to “${room.name}”.`;
    });
    if (!added) return;
    setWho('');
    changed();
  }

  async function remove(user: User) {
    await outcome.attempt(async () => {
      await client.noContent(`${members}/${segment(user.id)}`, { method: 'DELETE' });
      return `Removed ${displayName(user)} from “${room.name}”.`;
    }, 'delete');
    changed();
    heading.current?.focus();
  }

  const data = list.data;
  return (
    <section aria-labelledby="members-heading" class="panel">
      <h2 id="members-heading" ref={heading} tabIndex={-1}>
        Members of “{room.name}”
      </h2>
      <form class="filters" onSubmit={(event) => void add(event)}>
        <div class="field grow">
          <label for="member">New member</label>
          <input id="member" required autocomplete="off" aria-describedby="member-hint" value={who} onInput={(event) => setWho(event.currentTarget.value)} />
          <span id="member-hint" class="hint">
            Their email address or user id
          </span>
        </div>
        <button type="submit" class="align-end">
          Add member
        </button>
      </form>
      <Outcome outcome={outcome} />
      {list.error !== undefined && (
        <p role="alert" class="error">
          {messageFor(list.error, 'load')}
        </p>
      )}
      <p aria-live="polite" class="count">
        {data !== undefined ? (data.totalElements === 1 ? '1 member' : `${data.totalElements} members`) : list.error === undefined ? 'Loading members…' : ''}
      </p>
      <ul class="member-list">
        {(data?.content ?? []).map((user) => (
          <li key={user.id}>
            <span>
              {displayName(user)} <span class="hint email">{user.email}</span>
            </span>
            <button type="button" class="small secondary" aria-label={`Remove ${displayName(user)} from ${room.name}`} onClick={() => void remove(user)}>
              Remove
            </button>
          </li>
        ))}
      </ul>
      <Pager page={page} totalPages={data?.totalPages ?? 0} onPage={setPage} />
    </section>
  );
}
