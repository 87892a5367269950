import { DirectoryFileChanged, validateDirectoryFile, type ValidationResult } from '../domain/directory-file.ts';
import { ELEMENT, JsonFile, JsonFileChanged, JsonSyntaxError, type PathPattern } from './json-file.ts';

/** The arrays of an import file read element by element, never held whole: each organization's users and rooms. */
const STREAMED: PathPattern[] = [
  ['organizations', ELEMENT, 'users'],
  ['organizations', ELEMENT, 'rooms'],
];

/** A validated import file, still open: the import reads its users and rooms again. Close it when done. */
export interface OpenDirectoryFile extends ValidationResult {
  /** Throws if the file was written since it was opened (what was validated is no longer what would be imported). */
  assertUnchanged(): void;
  close(): void;
}

/** Whether an error met while importing an open file means the file was changed under the import. */
export function isChangedFileError(error: unknown): boolean {
  return error instanceof DirectoryFileChanged || error instanceof JsonSyntaxError;
}

/**
 * Opens and validates a directory file in bounded memory: the file is read
 * once to validate it (keeping only each organization's user ids, and its
 * emails while that organization is checked), and the import reads the users
 * and rooms again. Invalid JSON is one problem at `$`. Throws the file system's
 * error when the file cannot be opened.
 */
export function openDirectoryFile(name: string): OpenDirectoryFile {
  const file = JsonFile.open(name);
  try {
    const result = validateDirectoryFile(file.parse(STREAMED));
    const assertUnchanged = () => {
      try {
        file.assertUnchanged();
      } catch (error) {
        throw error instanceof JsonFileChanged ? new DirectoryFileChanged() : error;
      }
    };
    return { ...result, assertUnchanged, close: () => file.close() };
  } catch (error) {
    file.close();
    if (!(error instanceof JsonSyntaxError)) throw error;
    return {
      file: { organizations: [], credentials: [] },
      problems: [{ path: '$', message: `not valid JSON: ${error.message}` }],
      assertUnchanged: () => undefined,
      close: () => undefined,
    };
  }
}
