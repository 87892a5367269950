import type { ApiError } from './api.ts';

/** What is being attempted, so that a message can name it. */
export type Task = 'sign-in' | 'load' | 'upload' | 'save' | 'delete';

function seconds(value: number | undefined): string {
  if (value === undefined) return 'a moment';
  return value === 1 ? '1 second' : `${value} seconds`;
}

/**
 * The sentence a person reads for an API error: never JSON, never a bare status code.
 * Pure, so the wording is tested without a browser.
 */
export function messageFor(error: ApiError, task: Task): string {
  const { problem } = error;
  switch (problem.status) {
    case 0:
      return 'The server cannot be reached. The console keeps trying and carries on when it is back.';
    case 401:
      return task === 'sign-in'
        ? 'Wrong username or password.'
        : 'Your sign-in is no longer valid (the credential was changed or revoked). Please sign in again.';
    case 403:
      return 'Your credential does not cover this organization.';
    case 404:
      if (problem.code === 'room-not-found') return 'This signing room no longer exists.';
      if (problem.code === 'user-not-found') return 'This user no longer exists.';
      if (problem.code === 'document-not-found') return 'This document no longer exists.';
      return 'This no longer exists; it may have been deleted by someone else.';
    case 409:
      switch (problem.code) {
        case 'email-taken':
          return 'Another user already has this email address.';
        case 'user-exists':
          return 'A user with this id exists already.';
        case 'room-exists':
          return 'A signing room with this id exists already.';
        case 'user-name-taken':
          return 'Another user already has this user name.';
        case 'room-has-documents':
          return 'This signing room still holds documents. Delete them first: documents are evidence.';
        default:
          return 'This conflicts with the directory as it is now.';
      }
    case 412:
      return 'Someone else changed this in the meantime. The current version has been loaded: check it and save again.';
    case 413:
      return task === 'upload' ? 'This file is too large to upload.' : 'This request is too large.';
    case 415:
      return task === 'upload' ? 'This kind of file cannot be uploaded. Upload a PDF, PNG or JPEG file.' : 'The server does not accept this kind of content.';
    case 422:
      if (problem.code === 'document-encrypted') return 'This PDF is protected by a password. Remove the password and upload it again.';
      if (problem.code === 'document-unreadable')
        return `This file cannot be opened as a document${problem.detail !== undefined ? ` (${lowerFirst(stripPeriod(problem.detail))})` : ''}.`;
      return 'The server could not process this request.';
    case 429:
      return task === 'sign-in'
        ? `Too many failed sign-ins for this username. Try again in ${seconds(error.retryAfter)}.`
        : `Too many requests. Try again in ${seconds(error.retryAfter)}.`;
    case 400: {
      const fields = (problem.errors ?? []).map((entry) => `${entry.parameter}: ${entry.message}`);
      return fields.length > 0 ? `Please check: ${fields.join('; ')}.` : 'The request was not valid.';
    }
    default:
      if (problem.status >= 500) return 'The server had a problem. Please try again in a moment.';
      return problem.detail ?? 'Something went wrong.';
  }
}

function stripPeriod(text: string): string {
  return text.endsWith('.') ? text.slice(0, -1) : text;
}

function lowerFirst(text: string): string {
  return text.length === 0 ? text : text[0]!.toLowerCase() + text.slice(1);
}

/** "1 signatory", "1234 signatories": digits only, as the API's totalElements reads. */
export function countText(count: number, one: string, many: string): string {
  return `${count} ${count === 1 ? one : many}`;
}
