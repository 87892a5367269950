import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api.ts';

export interface Loaded<T> {
  data: T | undefined;
  error: ApiError | undefined;
  loading: boolean;
  /** `data` answers the keys of this render (not an earlier request's). */
  current: boolean;
  /** The request for the keys of this render has ended without an answer (an error, or the server away). */
  failed: boolean;
}

interface LoadState<T> {
  data: T | undefined;
  error: ApiError | undefined;
  loading: boolean;
  /** The keys `data` was loaded for, and those of the latest request begun. */
  dataKeys: unknown[] | undefined;
  requestKeys: unknown[] | undefined;
}

const sameKeys = (a: unknown[] | undefined, b: unknown[]) => a !== undefined && a.length === b.length && a.every((key, k) => Object.is(key, b[k]));

/**
 * Runs `load` whenever `keys` change and keeps only the newest answer: an older request still in
 * flight is aborted, and its answer, should it arrive, is dropped.
 */
export function useLoaded<T>(load: ((signal: AbortSignal) => Promise<T>) | undefined, keys: unknown[]): Loaded<T> {
  const [state, setState] = useState<LoadState<T>>({
    data: undefined,
    error: undefined,
    loading: load !== undefined,
    dataKeys: undefined,
    requestKeys: undefined,
  });
  const latest = useRef(0);
  useEffect(() => {
    if (load === undefined) {
      setState({ data: undefined, error: undefined, loading: false, dataKeys: undefined, requestKeys: undefined });
      return undefined;
    }
    const ticket = ++latest.current;
    const controller = new AbortController();
    setState((previous) => ({ ...previous, loading: true, requestKeys: keys }));
    load(controller.signal).then(
      (data) => {
        if (ticket === latest.current) setState({ data, error: undefined, loading: false, dataKeys: keys, requestKeys: keys });
      },
      (error: unknown) => {
        if (ticket !== latest.current || controller.signal.aborted) return;
        // An unreachable server is said once, by the page's banner; what was shown stays until it is back.
        if (error instanceof ApiError && error.status === 0) {
          setState((previous) => ({ ...previous, loading: false }));
          return;
        }
        setState((previous) => ({ ...previous, error: error instanceof ApiError ? error : new ApiError({ status: 500 }), loading: false }));
      },
    );
    return () => controller.abort();
  }, keys);
  // Judged in this render: in the one where the keys change, the effect that asks for them has not run yet.
  const current = sameKeys(state.dataKeys, keys);
  return {
    data: state.data,
    error: state.error,
    loading: state.loading,
    current,
    failed: !current && !state.loading && sameKeys(state.requestKeys, keys),
  };
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
