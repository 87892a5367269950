/** What was read after the last line given (typed ahead of its prompt). */
let typedAhead = '';

/**
 * Reads one line typed at the terminal without showing it (a password): `prompt` on standard
 * error, the characters read in raw mode until Enter, Backspace taking back the last one. Ctrl-C
 * or Ctrl-D gives up: undefined. Only for a standard input that is a terminal.
 */
export function readHiddenLine(prompt: string): Promise<string | undefined> {
  const { stdin, stderr } = process;
  return new Promise((resolve) => {
    stderr.write(prompt);
    stdin.setRawMode(true);
    stdin.setEncoding('utf8');
    let line = '';
    const finish = (typed: string | undefined) => {
      stdin.off('data', onData);
      stdin.setRawMode(false);
      stdin.pause();
      stderr.write('\n');
      resolve(typed);
    };
    const onData = (chunk: string) => {
      const chars = [...chunk];
      for (const [k, char] of chars.entries()) {
        if (char === '\r' || char === '\n' || char === '\u0003' || char === '\u0004') {
          typedAhead = chars.slice(k + 1).join('');
          return finish(char === '\r' || char === '\n' ? line : undefined);
        }
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
