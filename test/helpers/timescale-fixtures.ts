/** Accounts and events for the TimescaleDB mode tests (test/store/timescale*.test.ts). */
import { randomUUID } from 'node:crypto';
import type { UsageEvent } from '../../src/metering/event.js';
import type { Db } from '../../src/store/types.js';
import { makeEvent } from '../analytics/helpers/seed.js';

/** An account on `plan` whose plan changed long ago: its plan's retention applies in full. */
export async function account(db: Db, plan: string): Promise<string> {
  const [row] = await db.query<{ id: string }>(`INSERT INTO accounts (name, plan) VALUES ($1, $2) RETURNING id`, [
    `a${randomUUID().slice(0, 8)}`,
    plan,
  ]);
  await db.query(`UPDATE accounts SET plan_changed_at = now() - interval '400 days' WHERE id = $1`, [row!.id]);
  return row!.id;
}

export const ev = (
  accountId: string,
  time: number,
  cost = '0.00000123',
  tags: Record<string, string> = {},
): UsageEvent => makeEvent({ accountId, time: new Date(time).toISOString(), cost, tags });
