/**
 * Where a benchmark's two cores go: CPU time of chosen processes, of this one and of the whole
 * machine over a phase, and how long a process's main thread waited for a core (Linux, /proc).
 *
 * Why: the lookup mix beside writes shares two cores with the writing server, the write client,
 * wrk and the database. A ratio of throughputs alone cannot tell a slower lookup server from one
 * that got less of the machine; these figures, read in the same run, can.
 */
import { readFileSync } from 'node:fs';

/** Clock ticks per second of /proc's CPU times (USER_HZ: 100 on every Linux this runs on). */
const TICKS_PER_SECOND = 100;

/** A process's CPU time so far (all its threads, user and system), s; 0 once it has exited. */
function processCpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name may hold spaces and parentheses: fields after the last ')' are plain (utime is the 14th field).
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
  } catch {
    return 0;
  }
}

/** The main thread's time on a core and time waiting in the run queue for one so far, s (/proc/PID/schedstat). */
function mainThreadSchedule(pid: number): { running: number; waiting: number } {
  try {
    const [running, waiting] = readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').trim().split(' ').map(Number);
    return { running: (running ?? 0) / 1e9, waiting: (waiting ?? 0) / 1e9 };
  } catch {
    return { running: 0, waiting: 0 };
  }
}

/**
 * Busy and total CPU time of the whole machine so far, s (the first line of /proc/stat). Time the
 * hypervisor gave another guest (steal) is neither: it is counted apart.
 */
function machineSeconds(): { busy: number; total: number; steal: number } {
  const [, ...ticks] = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/);
  const [user, nice, system, idle, iowait, irq, softirq, steal] = ticks.map(Number);
  const busy = (user ?? 0) + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0);
  return { busy: busy / TICKS_PER_SECOND, total: (busy + (idle ?? 0) + (iowait ?? 0)) / TICKS_PER_SECOND, steal: (steal ?? 0) / TICKS_PER_SECOND };
}

/** What a phase used, in cores (CPU seconds per second of the phase). */
export interface CpuShares {
  /** Each named process: all its threads. */
  processes: Record<string, number>;
  /** The named processes' main threads' time waiting in the run queue for a core, as a share of the phase. */
  waiting: Record<string, number>;
  /** This process (the benchmark's own client). */
  self: number;
  /** The whole machine, busy (steal left out). */
  machine: number;
  /** Time the hypervisor ran another guest instead of this machine. */
  steal: number;
  /** Cores the machine has (as /proc/stat counts them over the phase). */
  cores: number;
}

/** Starts counting; `stop()` gives what each process and the machine used since. */
export function cpuPhase(pids: Record<string, number>): { stop: () => CpuShares } {
  const began = performance.now();
  const processesAt = Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, processCpuSeconds(pid)]));
  const scheduleAt = Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, mainThreadSchedule(pid)]));
  const selfAt = process.cpuUsage();
  const machineAt = machineSeconds();
  return {
    stop: () => {
      const seconds = (performance.now() - began) / 1000;
      const self = process.cpuUsage(selfAt);
      const machine = machineSeconds();
      const per = (value: number) => value / seconds;
      return {
        processes: Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, per(processCpuSeconds(pid) - (processesAt[name] ?? 0))])),
        waiting: Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, per(mainThreadSchedule(pid).waiting - (scheduleAt[name]?.waiting ?? 0))])),
        self: per((self.user + self.system) / 1e6),
        machine: per(machine.busy - machineAt.busy),
        steal: per(machine.steal - machineAt.steal),
        cores: (machine.total - machineAt.total) / seconds,
      };
    },
  };
}

/**
 * A markdown table of phases: A's and B's cores (each main thread's wait for a core), the
 * benchmark's own client, the rest of the machine (the load generator, the database's processes,
 * the servers' child processes, anything else), steal, A's CPU time per answer when `answers` (per second) is given, and B's per write when `writes` is.
 */
export function cpuTable(rows: { label: string; shares: CpuShares; answers?: number; writes?: number }[]): string[] {
  const cores = (value: number) => value.toFixed(2);
  const lines = [
    '| phase | A cores (its main thread waiting for one) | B cores (waiting) | bench client | rest: wrk, database, child processes | machine busy, of cores (steal) | A per answer | B per write |',
    '|---|---|---|---|---|---|---|---|',
  ];
  for (const { label, shares, answers, writes } of rows) {
    const a = shares.processes['A'] ?? 0;
    const b = shares.processes['B'] ?? 0;
    const rest = shares.machine - a - b - shares.self;
    const per = (cpu: number, count: number | undefined) => (count === undefined || count === 0 ? '' : `${((cpu * 1e6) / count).toFixed(0)} µs`);
    lines.push(
      `| ${label} | ${cores(a)} (${cores(shares.waiting['A'] ?? 0)}) | ${cores(b)} (${cores(shares.waiting['B'] ?? 0)}) | ${cores(shares.self)} | ${cores(Math.max(0, rest))} | ${cores(shares.machine)} of ${shares.cores.toFixed(1)} (${cores(shares.steal)}) | ${per(a, answers)} | ${per(b, writes)} |`,
    );
  }
  return lines;
}
