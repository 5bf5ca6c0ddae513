import { describe, expect, it } from 'vitest';
import pino from 'pino';
import { PeriodicTask, settlesWithin } from '../src/periodic.js';

/** A real pino logger whose JSON lines are kept. */
function recorder() {
  const lines: { fields: Record<string, unknown>; msg: string }[] = [];
  const logger = pino(
    { level: 'warn' },
    {
      write: (line: string) => {
        const { msg, ...fields } = JSON.parse(line) as { msg: string };
        lines.push({ fields, msg });
      },
    },
  );
  return { lines, logger };
}

describe('PeriodicTask', () => {
  it('warns once when an outage begins and once when it ends, with its length and failed runs', async () => {
    const { lines, logger } = recorder();
    let runs = 0;
    const task = new PeriodicTask(
      async () => {
        runs++;
        if (runs <= 4) throw new Error(`store down (${runs})`);
      },
      { what: 'spend re-read', logger, pauseMs: 5 },
    );
    await task.start('now');
    while (runs < 7) await new Promise((r) => setTimeout(r, 5));
    await task.stop();
    expect(lines.map((l) => l.msg)).toEqual(['spend re-read failed; retrying', 'spend re-read works again']);
    expect(lines[0]!.fields.err).toMatchObject({ type: 'Error', message: 'store down (1)' });
    expect(lines[1]!.fields).toMatchObject({ failures: 4 });
    expect(lines[1]!.fields.outageMs).toBeGreaterThanOrEqual(15); // three pauses of 5 ms at least
  });

  it('stop waits for the run under way, and nothing runs after it', async () => {
    const { logger } = recorder();
    let runs = 0;
    let release!: () => void;
    const task = new PeriodicTask(
      () => {
        runs++;
        return new Promise<void>((r) => (release = r));
      },
      { what: 'slow', logger, pauseMs: 1 },
    );
    void task.start('now');
    let stopped = false;
    const stopping = task.stop().then(() => (stopped = true));
    await new Promise((r) => setTimeout(r, 20));
    expect(stopped).toBe(false);
    release();
    await stopping;
    await new Promise((r) => setTimeout(r, 20));
    expect(runs).toBe(1);
  });

  it("'after-pause' waits one pause before the first run; a schedule function sets each pause", async () => {
    const { logger } = recorder();
    const at: number[] = [];
    const t0 = Date.now();
    const task = new PeriodicTask(async () => void at.push(Date.now() - t0), {
      what: 'x',
      logger,
      pauseMs: () => 30,
    });
    await task.start('after-pause');
    expect(at).toEqual([]);
    while (at.length < 2) await new Promise((r) => setTimeout(r, 5));
    await task.stop();
    expect(at[0]).toBeGreaterThanOrEqual(29);
    expect(at[1]! - at[0]!).toBeGreaterThanOrEqual(29);
  });
});

describe('settlesWithin', () => {
  it('tells whether a promise settled in time, and rejects as the promise does', async () => {
    expect(await settlesWithin(Promise.resolve(1), 50)).toBe(true);
    expect(await settlesWithin(new Promise(() => {}), 10)).toBe(false);
    await expect(settlesWithin(Promise.reject(new Error('no')), 50)).rejects.toThrow('no');
  });
});
