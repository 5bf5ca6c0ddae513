/** The bench's child processes (mock provider, pass-through, daemon) and what /proc says of them. */
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';

export interface Service {
  child: ChildProcess;
  url: string;
  stopping?: boolean;
}

/** Spawns `node <args>` and waits for its `… listening on URL` line. */
export async function spawnService(args: string[], env: NodeJS.ProcessEnv, cwd: string): Promise<Service> {
  const child = spawn(process.execPath, args, { cwd, env, stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /listening on (\S+)/.exec(out);
      if (m) resolve(m[1]!);
    });
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited with ${code}`)));
  });
  const service: Service = { child, url };
  // A service that dies mid-run says so (else the run fails on a closed socket, naming nothing).
  child.once('exit', (code, signal) => {
    if (!service.stopping)
      process.stderr.write(`${args.join(' ')} exited during the run (${signal ?? `code ${code}`})\n`);
  });
  return service;
}

export async function stopService(s: Service): Promise<void> {
  if (s.child.exitCode !== null) return;
  s.stopping = true;
  const exited = new Promise((r) => s.child.once('exit', r));
  s.child.kill('SIGTERM');
  await exited;
}

/** CPU time (user + system) a process used so far, every thread included, in µs. Thread
 *  times come from schedstat (ns) when the kernel has it, else from stat (clock ticks). */
export function cpuMicros(pid: number): number {
  try {
    let ns = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    }
    // Threads that ended are no longer listed: their time is in the process's stat (ticks).
    const fromStat = statMicros(pid);
    return Math.max(ns / 1000, fromStat);
  } catch {
    return statMicros(pid);
  }
}

function statMicros(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  // utime and stime are fields 14 and 15 (1-based), in clock ticks of 10 ms.
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

/** CPU time of every PostgreSQL process on this machine so far, with the backends that ended
 *  (the postmaster's reaped children: a connection closed when idle takes its backend's CPU
 *  with it), in µs. 0 when PostgreSQL runs elsewhere. */
export function postgresCpuMicros(): number {
  let ticks = 0;
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      if (!comm.startsWith('postgres')) continue;
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // utime, stime, and the reaped children's cutime, cstime (fields 14-17, 1-based), in ticks.
      ticks += Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
    } catch {
      // the process ended meanwhile
    }
  }
  return ticks * 10_000;
}

/** CPU time the whole machine spent so far (every core, every process; /proc/stat), in µs. */
export function machineCpuMicros(): number {
  const [, ...ticks] = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/).map(Number);
  // user nice system idle iowait irq softirq steal …: all but idle and iowait.
  const busy = ticks.slice(0, 8).reduce((a, b) => a + b, 0) - ticks[3]! - ticks[4]!;
  return busy * 10_000;
}

export function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

/** A port free right now on 127.0.0.1 (for a process whose address must be known before it prints it). */
export async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address() as { port: number };
  await new Promise((r) => srv.close(r));
  return port;
}
