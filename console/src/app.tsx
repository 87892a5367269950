import { useEffect, useMemo, useState } from 'preact/hooks';
import { ApiClient, ApiError, segment, type Credential, type Organization, type Room } from './api.ts';
import { DirectoryView } from './directory-view.tsx';
import { DocumentsPanel } from './documents-panel.tsx';
import { messageFor } from './messages.ts';
import { organizationsOf, SignIn, type SignedIn } from './sign-in.tsx';
import { SignatoriesPanel } from './signatories-panel.tsx';
import { useLoaded } from './use-api.ts';

/** The tab's session: the credential lives in sessionStorage (this tab only), never in a URL or localStorage. */
const SESSION_KEY = 'signroom.credential';

function storedCredential(): Credential | undefined {
  try {
    const text = sessionStorage.getItem(SESSION_KEY);
    if (text === null) return undefined;
    const value = JSON.parse(text) as Credential;
    return typeof value.username === 'string' && typeof value.password === 'string' ? value : undefined;
  } catch {
    return undefined;
  }
}

/** How often the console asks whether a server that went away is back. */
const RECONNECT_MS = 2_000;

type View = 'room' | 'directory';

export function App() {
  const [credential, setCredential] = useState<Credential | undefined>(storedCredential);
  const [organizations, setOrganizations] = useState<Organization[] | undefined>();
  // Why the person was signed out, said on the sign-in form.
  const [signedOutBecause, setSignedOutBecause] = useState<string | undefined>();
  const [reachable, setReachable] = useState(true);
  // Bumped when the server comes back, so every view reads again what it shows.
  const [generation, setGeneration] = useState(0);
  const client = useMemo(
    () =>
      credential === undefined
        ? undefined
        : new ApiClient(credential, { reachable: setReachable, unauthorized: (error) => signOut(messageFor(error, 'load')) }),
    [credential],
  );

  useEffect(() => {
    if (reachable) return undefined;
    const timer = setInterval(() => {
      fetch('/readyz', { cache: 'no-store', credentials: 'omit' }).then(
        (response) => {
          if (response.ok) {
            setReachable(true);
            setGeneration((value) => value + 1);
          }
        },
        () => {},
      );
    }, RECONNECT_MS);
    return () => clearInterval(timer);
  }, [reachable]);

  // A stored credential (a reload of the tab) is checked again before anything is shown.
  useEffect(() => {
    if (client === undefined || organizations !== undefined) return;
    organizationsOf(client).then(setOrganizations, (error: unknown) => {
      // A 401 has signed out already, saying why; an unreachable server is retried when it is back.
      if (!(error instanceof ApiError) || (error.status !== 0 && error.status !== 401)) signOut();
    });
  }, [client, organizations, generation]);

  function signedIn(session: SignedIn) {
    setSignedOutBecause(undefined);
    sessionStorage.setItem(SESSION_KEY, JSON.stringify(session.credential));
    setOrganizations(session.organizations);
    setCredential(session.credential);
  }

  function signOut(because?: string) {
    setSignedOutBecause(because);
    sessionStorage.removeItem(SESSION_KEY);
    setCredential(undefined);
    setOrganizations(undefined);
  }

  if (credential === undefined || client === undefined) return <SignIn onSignedIn={signedIn} notice={signedOutBecause} />;
  return (
    <>
      {!reachable && (
        <p role="alert" class="banner">
          {messageFor(new ApiError({ status: 0 }), 'load')}
        </p>
      )}
      {organizations === undefined ? (
        <main id="main">
          <p role="status">Loading…</p>
        </main>
      ) : (
        <Console client={client} username={credential.username} organizations={organizations} generation={generation} onSignOut={() => signOut()} />
      )}
    </>
  );
}

interface ConsoleProps {
  client: ApiClient;
  username: string;
  organizations: Organization[];
  generation: number;
  onSignOut: () => void;
}

function Console({ client, username, organizations, generation, onSignOut }: ConsoleProps) {
  const [organizationId, setOrganizationId] = useState(organizations[0]?.id ?? '');
  const [chosenRoomId, setRoomId] = useState('');
  const [view, setView] = useState<View>('room');
  const [roomsVersion, setRoomsVersion] = useState(0);
  const rooms = useLoaded(
    organizationId === ''
      ? undefined
      : async (signal) => ({ organizationId, rooms: await client.all<Room>(`/organizations/${segment(organizationId)}/rooms`, signal) }),
    [client, organizationId, roomsVersion, generation],
  );
  // The rooms of the organization chosen now: while another's are still shown, none.
  const roomsRead = rooms.data?.organizationId === organizationId ? rooms.data.rooms : undefined;
  const roomList = roomsRead ?? [];
  // The chosen room while it exists; otherwise the first. Derived as the rooms are shown, so the
  // picker is never enabled with no room chosen (an effect chose it one render late).
  const roomId = roomList.some((room) => room.id === chosenRoomId) ? chosenRoomId : (roomList[0]?.id ?? '');

  if (organizations.length === 0) {
    return (
      <main id="main">
        <Header username={username} onSignOut={onSignOut} />
        <p role="alert" class="error">
          The credential “{username}” covers no organization. Ask an operator to extend its scope, or sign in with another credential.
        </p>
      </main>
    );
  }

  return (
    <>
      <Header username={username} onSignOut={onSignOut}>
        <div class="pickers">
          <div class="field">
            <label for="organization">Organization</label>
            <select
              id="organization"
              value={organizationId}
              onChange={(event) => {
                // The old organization's room is not one of the new one's: choose again once its rooms are read.
                setRoomId('');
                setOrganizationId(event.currentTarget.value);
              }}
            >
              {organizations.map((organization) => (
                <option key={organization.id} value={organization.id}>
                  {optionLabel(organization, organizations)}
                </option>
              ))}
            </select>
          </div>
          <div class="field">
            <label for="room">Room</label>
            <select id="room" value={roomId} onChange={(event) => setRoomId(event.currentTarget.value)} disabled={roomList.length === 0}>
              {roomList.length === 0 && <option value="">{roomsRead === undefined ? 'Loading rooms…' : 'No rooms'}</option>}
              {roomList.map((room) => (
                <option key={room.id} value={room.id}>
                  {optionLabel(room, roomList)}
                </option>
              ))}
            </select>
          </div>
        </div>
        <nav aria-label="Views">
          <button type="button" aria-pressed={view === 'room'} onClick={() => setView('room')}>
            Signing room
          </button>
          <button type="button" aria-pressed={view === 'directory'} onClick={() => setView('directory')}>
            Directory
          </button>
        </nav>
      </Header>
      <main id="main">
        {rooms.error !== undefined && (
          <p role="alert" class="error">
            {messageFor(rooms.error, 'load')}
          </p>
        )}
        {view === 'room' &&
          (roomId === '' ? (
            roomsRead !== undefined && <p class="notice">This organization has no signing room yet. Create one under Directory.</p>
          ) : (
            <div class="room-view">
              <SignatoriesPanel key={`${organizationId}/${roomId}`} client={client} organizationId={organizationId} roomId={roomId} generation={generation} />
              <DocumentsPanel
                key={`${organizationId}/${roomId}/documents`}
                client={client}
                organizationId={organizationId}
                roomId={roomId}
                generation={generation}
              />
            </div>
          ))}
        {view === 'directory' && (
          <DirectoryView
            key={organizationId}
            client={client}
            organizationId={organizationId}
            room={roomList.find((room) => room.id === roomId)}
            generation={generation}
            onRoomsChanged={() => setRoomsVersion((value) => value + 1)}
          />
        )}
      </main>
    </>
  );
}

/** An option reads as the name; the id is added only where two names are the same. */
function optionLabel(item: { id: string; name: string }, all: readonly { id: string; name: string }[]): string {
  return all.some((other) => other.id !== item.id && other.name === item.name) ? `${item.name} (${item.id})` : item.name;
}

function Header({ username, onSignOut, children }: { username: string; onSignOut: () => void; children?: preact.ComponentChildren }) {
  return (
    <header class="top">
      <div class="title">
        <h1>signroom console</h1>
        <span class="who">
          Signed in as <strong>{username}</strong>
        </span>
        <button type="button" class="secondary" onClick={onSignOut}>
          Sign out
        </button>
      </div>
      {children}
    </header>
  );
}
