import { useState } from 'preact/hooks';
import { ApiClient, ApiError, type Credential, type Organization } from './api.ts';
import { messageFor } from './messages.ts';

export interface SignedIn {
  credential: Credential;
  organizations: Organization[];
}

/** The organizations a credential covers: proves the credential and fills the Organization box at once. */
export function organizationsOf(client: ApiClient): Promise<Organization[]> {
  return client.all<Organization>('/organizations');
}

export function SignIn({ onSignedIn, notice }: { onSignedIn: (session: SignedIn) => void; notice?: string | undefined }) {
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [problem, setProblem] = useState<string | undefined>(notice);
  const [busy, setBusy] = useState(false);

  async function submit(event: Event) {
    event.preventDefault();
    setBusy(true);
    setProblem(undefined);
    const credential = { username, password };
    try {
      onSignedIn({ credential, organizations: await organizationsOf(new ApiClient(credential)) });
    } catch (error) {
      setProblem(messageFor(error instanceof ApiError ? error : new ApiError({ status: 500 }), 'sign-in'));
      setBusy(false);
    }
  }

  return (
    <main id="main" class="sign-in">
      <h1>signroom console</h1>
      <form onSubmit={(event) => void submit(event)} aria-labelledby="sign-in-heading">
        <h2 id="sign-in-heading">Sign in</h2>
        <p class="hint">Use the Basic credential of your organization's administrator. It is kept in this tab only.</p>
        {problem !== undefined && (
          <p role="alert" class="error">
            {problem}
          </p>
        )}
        <label for="username">Username</label>
        <input id="username" name="username" autocomplete="username" required value={username} onInput={(event) => setUsername(event.currentTarget.value)} />
        <label for="password">Password</label>
        <input
          id="password"
          name="password"
          type="password"
          autocomplete="current-password"
          required
          value={password}
          onInput={(event) => setPassword(event.currentTarget.value)}
        />
        <button type="submit" disabled={busy}>
          Sign in
        </button>
      </form>
    </main>
  );
}
