/** What a deployment holds in memory: a process and every process below it, read from /proc (Linux). */
import { readdirSync, readFileSync } from 'node:fs';

/** The process ids below `pid` (children, their children…), found by each process's parent in /proc. */
export function descendants(pid: number): number[] {
  const parents = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // exited meanwhile
    }
    // The command name may hold spaces and parentheses: fields after the last ')' are plain.
    const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    const list = parents.get(parent) ?? [];
    list.push(Number(entry));
    parents.set(parent, list);
  }
  const found: number[] = [];
  const walk = (id: number) => {
    for (const child of parents.get(id) ?? []) {
      found.push(child);
      walk(child);
    }
  };
  walk(pid);
  return found;
}

/** A process's proportional set size, KiB (0 once it has exited): shared pages are split among the processes sharing them. */
export function pssKiB(pid: number): number {
  try {
    return Number(/^Pss:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))?.[1] ?? 0);
  } catch {
    return 0;
  }
}

/** The deployment started as `pid`: its proportional set size summed with every descendant's, and how many processes that is. */
export function deploymentMemory(pid: number): { pssMiB: number; processes: number } {
  const pids = [pid, ...descendants(pid)];
  return { pssMiB: pids.reduce((sum, id) => sum + pssKiB(id), 0) / 1024, processes: pids.length };
}
