import { windowBounds } from '../calendar.js';
import type { Logger } from '../log.js';
import type { Db, Queryable } from '../store/types.js';
import { loadHorizons, timescaleRetention, type TimescaleRetentionResult } from '../store/timescale/maintenance.js';
import { loadPlans } from './plans.js';

export interface RetentionResult {
  rawEvents: number;
  rollupRows: number;
  /** Claims of batch results (sql/070) dropped with the rollups of their months. */
  claims: number;
  /** TimescaleDB mode: what the chunk-level retention did instead of row DELETEs. */
  timescale?: TimescaleRetentionResult;
}

const DAY = 86_400_000;

/**
 * Deletes raw events past each plan's retention, per plan, in bounded batches so writers are
 * never blocked for long; rollups are kept for the plan's rollup months, so monthly and
 * quarterly views outlive raw events. An account whose plan changed less than that plan's
 * retention ago is left alone: a downgrade never deletes data sooner than the new plan
 * itself would have. One sidecar of a fleet at a time (advisory lock); the others skip.
 *
 * Claims of batch results (usage_claims) go with the rollups, not with the raw events: the
 * charge lives on in the rollups, and a results file can be downloaded again long after its
 * events are gone (OpenAI keeps output files until they are deleted) without being charged again.
 */
export async function runRetention(
  db: Db,
  opts: { batch?: number; now?: number; logger?: Logger } = {},
): Promise<RetentionResult | undefined> {
  const batch = opts.batch ?? 5_000;
  const now = opts.now ?? Date.now();
  if (db.kind === 'timescale') {
    // Per-account DELETEs would make a later refresh wipe those accounts' days from the
    // aggregates: chunks are dropped at the longest plan's retention instead, and each plan's
    // own retention is a visibility limit in queries (src/store/timescale/maintenance.ts).
    return db.tryAdvisoryLock('meter.retention', async (conn) => {
      const timescale = await timescaleRetention(conn, now);
      // The aggregates keep every account's days for the longest rollup retention: so do claims.
      const claims = await deleteClaims(conn, monthsBefore(now, (await loadHorizons(conn)).longestRollupMonths));
      const result = { rawEvents: 0, rollupRows: timescale.carriedRows, claims, timescale };
      if (
        timescale.droppedChunks ||
        timescale.compressedChunks ||
        timescale.droppedAggregateChunks ||
        timescale.carriedRows ||
        claims
      ) {
        opts.logger?.info(result, 'retention dropped and compressed expired chunks');
      }
      return result;
    });
  }
  return db.tryAdvisoryLock('meter.retention', async (conn) => {
    const result: RetentionResult = { rawEvents: 0, rollupRows: 0, claims: 0 };
    for (const plan of (await loadPlans(conn)).values()) {
      const cutoff = new Date(now - plan.rawRetentionDays * DAY);
      const ids = (
        await conn.query<{ id: string }>('SELECT id FROM accounts WHERE plan = $1 AND plan_changed_at <= $2', [
          plan.name,
          cutoff,
        ])
      ).map((r) => r.id);
      if (ids.length > 0) result.rawEvents += await deleteInBatches(conn, ids, cutoff, batch);

      const rollupCutoff = monthsBefore(now, plan.rollupRetentionMonths).toISOString().slice(0, 10);
      for (const table of ['usage_daily', 'usage_tag_daily']) {
        const rows = await conn.query(
          `DELETE FROM ${table} WHERE day < $1 AND account_id IN (SELECT id FROM accounts WHERE plan = $2) RETURNING 1`,
          [rollupCutoff, plan.name],
        );
        result.rollupRows += rows.length;
      }
      result.claims += await deleteClaims(conn, monthsBefore(now, plan.rollupRetentionMonths), plan.name);
    }
    await deleteOrphans(conn, now, batch, result);
    if (result.rawEvents || result.rollupRows || result.claims)
      opts.logger?.info(result, 'retention deleted expired data');
    return result;
  });
}

/**
 * Data of accounts deleted since (`meter accounts delete` keeps their events, docs/security.md):
 * no plan is theirs any more, so the shortest retention of any plan applies.
 */
async function deleteOrphans(conn: Queryable, now: number, batch: number, result: RetentionResult): Promise<void> {
  const plans = [...(await loadPlans(conn)).values()];
  if (plans.length === 0) return;
  const ids = (
    await conn.query<{ account_id: string }>(
      `SELECT DISTINCT d.account_id FROM usage_daily d WHERE NOT EXISTS (SELECT 1 FROM accounts a WHERE a.id = d.account_id)`,
    )
  ).map((r) => r.account_id);
  if (ids.length === 0) return;
  const rawDays = Math.min(...plans.map((p) => p.rawRetentionDays));
  const rollupMonths = Math.min(...plans.map((p) => p.rollupRetentionMonths));
  result.rawEvents += await deleteInBatches(conn, ids, new Date(now - rawDays * DAY), batch);
  const rollupCutoff = monthsBefore(now, rollupMonths);
  for (const table of ['usage_daily', 'usage_tag_daily']) {
    const rows = await conn.query(`DELETE FROM ${table} WHERE day < $1 AND account_id = ANY($2::uuid[]) RETURNING 1`, [
      rollupCutoff.toISOString().slice(0, 10),
      ids,
    ]);
    result.rollupRows += rows.length;
  }
  const claims = await conn.query(
    'DELETE FROM usage_claims WHERE claimed_at < $1 AND account_id = ANY($2::uuid[]) RETURNING 1',
    [rollupCutoff, ids],
  );
  result.claims += claims.length;
}

/** The first day of the month `months` before the one `now` is in (UTC). */
const monthsBefore = (now: number, months: number): Date => new Date(windowBounds('month', now, -months).start);

/** Claims made before `cutoff`, of one plan's accounts or (no plan) of every account. */
async function deleteClaims(db: Queryable, cutoff: Date, plan?: string): Promise<number> {
  const rows =
    plan === undefined
      ? await db.query('DELETE FROM usage_claims WHERE claimed_at < $1 RETURNING 1', [cutoff])
      : await db.query(
          'DELETE FROM usage_claims WHERE claimed_at < $1 AND account_id IN (SELECT id FROM accounts WHERE plan = $2) RETURNING 1',
          [cutoff, plan],
        );
  return rows.length;
}

async function deleteInBatches(db: Queryable, accountIds: string[], cutoff: Date, batch: number): Promise<number> {
  let total = 0;
  for (;;) {
    const rows = await db.query(
      `DELETE FROM usage_events WHERE (time, event_id) IN (
         SELECT time, event_id FROM usage_events
          WHERE account_id = ANY($1::uuid[]) AND time < $2 LIMIT $3)
       RETURNING 1`,
      [accountIds, cutoff, batch],
    );
    total += rows.length;
    if (rows.length < batch) return total;
  }
}
