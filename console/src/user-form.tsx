import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, type User, type UserStatus } from './api.ts';
import { messageFor } from './messages.ts';

export interface UserDraft {
  firstname: string | null;
  lastname: string | null;
  email: string;
  external: boolean;
  status: UserStatus;
}

interface Props {
  heading: string;
  initial: User | undefined;
  /** Said above the form, e.g. that it was reloaded after someone else's change. */
  notice: string | undefined;
  onSave: (draft: UserDraft) => Promise<void>;
  onCancel: () => void;
}

/** An empty name field is no name (null), as the API stores it. */
function nameOrNull(text: string): string | null {
  const trimmed = text.trim();
  return trimmed === '' ? null : trimmed;
}

export function UserForm({ heading, initial, notice, onSave, onCancel }: Props) {
  const [firstname, setFirstname] = useState(initial?.firstname ?? '');
  const [lastname, setLastname] = useState(initial?.lastname ?? '');
  const [email, setEmail] = useState(initial?.email ?? '');
  const [external, setExternal] = useState(initial?.external ?? false);
  const [status, setStatus] = useState<UserStatus>(initial?.status ?? 'active');
  const [problem, setProblem] = useState<string | undefined>();
  const [busy, setBusy] = useState(false);
  const first = useRef<HTMLInputElement>(null);
  useEffect(() => first.current?.focus(), []);

  async function submit(event: Event) {
    event.preventDefault();
    setBusy(true);
    setProblem(undefined);
    try {
      await onSave({ firstname: nameOrNull(firstname), lastname: nameOrNull(lastname), email: email.trim(), external, status });
    } catch (error) {
      setProblem(error instanceof ApiError ? messageFor(error, 'save') : 'Something went wrong.');
      setBusy(false);
    }
  }

  return (
    <form
      class="user-form"
      aria-labelledby="user-form-heading"
      onSubmit={(event) => void submit(event)}
      onKeyDown={(event) => event.key === 'Escape' && onCancel()}
    >
      <h3 id="user-form-heading">{heading}</h3>
      {notice !== undefined && (
        <p role="alert" class="warning">
          {notice}
        </p>
      )}
      {problem !== undefined && (
        <p role="alert" class="error">
          {problem}
        </p>
      )}
      <div class="form-grid">
        <div class="field">
          <label for="user-firstname">First name</label>
          <input
            ref={first}
            id="user-firstname"
            autocomplete="off"
            maxLength={255}
            value={firstname}
            onInput={(event) => setFirstname(event.currentTarget.value)}
          />
        </div>
        <div class="field">
          <label for="user-lastname">Last name</label>
          <input id="user-lastname" autocomplete="off" maxLength={255} value={lastname} onInput={(event) => setLastname(event.currentTarget.value)} />
        </div>
        <div class="field">
          <label for="user-email">Email</label>
          <input id="user-email" type="email" required autocomplete="off" value={email} onInput={(event) => setEmail(event.currentTarget.value)} />
        </div>
        <div class="field">
          <label for="user-status-edit">Account status</label>
          <select id="user-status-edit" value={status} onChange={(event) => setStatus(event.currentTarget.value as UserStatus)}>
            <option value="active">Active</option>
            <option value="pending">Pending (invited)</option>
            <option value="suspended">Suspended</option>
          </select>
        </div>
        <div class="field checkbox">
          <input id="user-external" type="checkbox" checked={external} onChange={(event) => setExternal(event.currentTarget.checked)} />
          <label for="user-external">External person (a counterparty, say)</label>
        </div>
      </div>
      <div class="buttons">
        <button type="submit" disabled={busy}>
          Save user
        </button>
        <button type="button" class="secondary" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}
