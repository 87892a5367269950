import { PassThrough } from 'node:stream';

/** One structured log line (pino JSON), with the fields the tests look at. */
export type LogEntry = Record<string, unknown> & { event?: string; msg?: string };

/** A log stream for startTestApp, keeping what the app writes, line by line. */
export class CapturedLog {
  readonly stream = new PassThrough();
  /** Every line written so far, as written. */
  readonly lines: string[] = [];

  constructor() {
    this.stream.on('data', (chunk: Buffer) =>
      this.lines.push(
        ...chunk
          .toString('utf8')
          .split('\n')
          .filter((line) => line !== ''),
      ),
    );
  }

  /** Every entry logged so far. */
  get entries(): LogEntry[] {
    return this.lines.map((line) => JSON.parse(line) as LogEntry);
  }

  /** The entries logged so far with this `event` field. */
  events(name: string): LogEntry[] {
    return this.lines.map((line) => JSON.parse(line) as LogEntry).filter((entry) => entry.event === name);
  }
}
