import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api.ts';

export interface Loaded<T> {
  data: T | undefined;
  error: ApiError | undefined;
  loading: boolean;
}

/**
 * Runs `load` whenever `keys` change and keeps only the newest answer: an older request still in
 * flight is aborted, and its answer, should it arrive, is dropped.
 */
export function useLoaded<T>(load: ((signal: AbortSignal) => Promise<T>) | undefined, keys: unknown[]): Loaded<T> {
  const [state, setState] = useState<Loaded<T>>({ data: undefined, error: undefined, loading: load !== undefined });
  const latest = useRef(0);
  useEffect(() => {
    if (load === undefined) {
      setState({ data: undefined, error: undefined, loading: false });
      return undefined;
    }
    const ticket = ++latest.current;
    const controller = new AbortController();
    setState((previous) => ({ ...previous, loading: true }));
    load(controller.signal).then(
      (data) => {
        if (ticket === latest.current) setState({ data, error: undefined, loading: false });
      },
      (error: unknown) => {
        if (ticket !== latest.current || controller.signal.aborted) return;
        // An unreachable server is said once, by the page's banner; what was shown stays until it is back.
        if (error instanceof ApiError && error.status === 0) {
          setState((previous) => ({ ...previous, loading: false }));
          return;
        }
        setState((previous) => ({ data: previous.data, error: error instanceof ApiError ? error : new ApiError({ status: 500 }), loading: false }));
      },
    );
    return () => controller.abort();
  }, keys);
  return state;
}

/** `value`, once it has stopped changing for `delayMs`. */
export function useDebounced<T>(value: T, delayMs: number): T {
  const [settled, setSettled] = useState(value);
  useEffect(() => {
    const timer = setTimeout(() => setSettled(value), delayMs);
    return () => clearTimeout(timer);
  }, [value, delayMs]);
  return settled;
}
