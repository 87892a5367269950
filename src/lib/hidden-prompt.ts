/** What was read after the last line given (typed or pasted ahead of its prompt). */
let typedAhead = '';

/** A terminal's escape sequence (an arrow, Delete, a function key): CSI or SS3, as keys send them. */
const ESCAPE_SEQUENCE = /^\u001b(?:\[[0-?]*[ -/]*[@-~]|O.|.)?/u;

/**
 * Reads one line typed at the terminal without showing it (a password): `prompt` on standard
 * error once the terminal no longer echoes, the characters read until Enter (a CR, an LF, or a
 * CR LF as one), Backspace taking back the last one, the escape sequences of other keys ignored.
 * Ctrl-C or Ctrl-D gives up: undefined. Only for a standard input that is a terminal.
 */
export function readHiddenLine(prompt: string): Promise<string | undefined> {
  const { stdin, stderr } = process;
  return new Promise((resolve) => {
    // Raw mode (no echo) before the prompt: an answer sent as soon as the prompt shows is not echoed.
    stdin.setRawMode(true);
    stdin.setEncoding('utf8');
    stderr.write(prompt);
    let line = '';
    const finish = (typed: string | undefined, rest: string) => {
      typedAhead = rest;
      stdin.off('data', onData);
      stdin.setRawMode(false);
      stdin.pause();
      stderr.write('\n');
      resolve(typed);
    };
    const onData = (chunk: string) => {
      for (let rest = chunk; rest.length > 0;) {
        const char = String.fromCodePoint(rest.codePointAt(0)!);
        if (char === '\u001b') {
          rest = rest.slice(ESCAPE_SEQUENCE.exec(rest)![0].length);
          continue;
        }
        rest = rest.slice(char.length);
        if (char === '\r' || char === '\n') return finish(line, char === '\r' && rest.startsWith('\n') ? rest.slice(1) : rest);
        if (char === '\u0003' || char === '\u0004') return finish(undefined, rest);
        if (char === '\u007f' || char === '\b') line = [...line].slice(0, -1).join('');
        else if (char >= ' ') line += char;
      }
    };
    stdin.on('data', onData);
    if (typedAhead !== '') {
      const ahead = typedAhead;
      typedAhead = '';
      onData(ahead);
      if (!stdin.listeners('data').includes(onData)) return;
    }
    stdin.resume();
  });
}
