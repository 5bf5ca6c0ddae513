import type { Logger } from '../log.js';
import type { Component } from '../component.js';
import { PeriodicTask } from '../periodic.js';
import type { Db, Queryable } from '../store/types.js';
import { ServedAccounts } from './served.js';

/** What one pulse found. */
export interface Pulse {
  /** The change counter moved since the last pulse (always so on the first). */
  changed: boolean;
  /** Served accounts that had events written (by any sidecar) since the last pulse. */
  dirty: ReadonlySet<string>;
  /** Alert deliveries are due. */
  alertsDue: boolean;
}

/** Seconds of overlap between pulses: an event's recorded_at is taken before its commit. */
const RECENT_MARGIN_S = 5;

const PULSE = `SELECT (SELECT version::text FROM meter_changes WHERE id = 1) AS version,
       (now() - make_interval(secs => ${RECENT_MARGIN_S}))::text AS since,
       coalesce((SELECT array_agg(a.id::text) FROM unnest($1::uuid[]) AS a(id)
                  WHERE $2::timestamptz IS NOT NULL AND EXISTS (
                    SELECT 1 FROM usage_events e WHERE e.account_id = a.id AND e.recorded_at > $2::timestamptz
                       AND e.time > $2::timestamptz - interval '1 day')), '{}') AS dirty,
       EXISTS (SELECT 1 FROM alert_deliveries WHERE status = 'pending' AND next_attempt_at <= now()) AS alerts_due`;

/**
 * The sidecar's one poll of the database, its pulse: one statement every interval answers
 * whether anything it keeps in memory changed, which of the accounts it serves had events
 * written since the last pulse, and whether alerts are due. The change counter
 * (sql/090_fleet.sql) is bumped by plans, budgets, limit overrides, accounts and keys in the
 * transaction that changes them. So an idle sidecar reads one row and probes nothing, and the
 * cost of a busy one grows with the accounts it serves, not with the fleet's. A reload that
 * failed is tried again at the next pulse, which then looks as far back. A listener that failed
 * hears, at the next pulse, what it missed merged into what is new, while the others move on:
 * one listener failing for good does not make every later pulse re-read the whole fleet.
 */
export class ChangeWatcher implements Component {
  readonly name = 'changes';
  /** Accounts this sidecar has served calls for lately (the daemon's metering touches them). */
  readonly served = new ServedAccounts();
  readonly #reloads: ((db: Queryable) => Promise<void>)[] = [];
  readonly #unchanged: (() => void)[] = [];
  /** Each listener, and the pulses it failed to hear, merged (heard with the next one). */
  readonly #listeners: { hear: (pulse: Pulse) => Promise<void>; missed: Pulse | undefined }[] = [];
  readonly #task: PeriodicTask;
  #seen: string | undefined;
  #since: string | null = null;

  constructor(
    private readonly db: Db,
    logger: Logger,
    intervalMs: number,
  ) {
    this.#task = new PeriodicTask(() => this.check(), { what: 'changes: re-read', logger, pauseMs: intervalMs });
  }

  /** `reload` runs at start and after every change; `unchanged` after a check that found none
   *  (what was read is confirmed current). */
  watch(reload: (db: Queryable) => Promise<void>, unchanged?: () => void): void {
    this.#reloads.push(reload);
    if (unchanged) this.#unchanged.push(unchanged);
  }

  /** `listener` hears every pulse, after the reloads. */
  onPulse(listener: (pulse: Pulse) => Promise<void>): void {
    this.#listeners.push({ hear: listener, missed: undefined });
  }

  /** One pulse; true when the change counter had moved. */
  async check(): Promise<boolean> {
    const [row] = await this.db.query<{ version: string | null; since: string; dirty: string[]; alerts_due: boolean }>(
      PULSE,
      [this.served.list(), this.#since],
      { name: 'meter_pulse' },
    );
    const version = row?.version ?? '0';
    const changed = version !== this.#seen;
    // Read before reloading: a change committed meanwhile moves the counter again.
    if (changed) for (const reload of this.#reloads) await reload(this.db);
    else for (const confirm of this.#unchanged) confirm();
    const pulse: Pulse = { changed, dirty: new Set(row?.dirty ?? []), alertsDue: row?.alerts_due ?? false };
    let failed: unknown;
    for (const listener of this.#listeners) {
      const heard = listener.missed ? merge(listener.missed, pulse) : pulse;
      try {
        await listener.hear(heard);
        listener.missed = undefined;
      } catch (err) {
        listener.missed = heard;
        failed ??= err;
      }
    }
    this.#seen = version;
    this.#since = row?.since ?? null;
    if (failed) throw failed;
    return changed;
  }

  async start(): Promise<void> {
    await this.check();
    void this.#task.start('after-pause');
  }

  stop(): Promise<void> {
    return this.#task.stop();
  }
}

/** What a listener missed and what is new, as one pulse. */
function merge(missed: Pulse, next: Pulse): Pulse {
  return {
    changed: missed.changed || next.changed,
    dirty: new Set([...missed.dirty, ...next.dirty]),
    alertsDue: missed.alertsDue || next.alertsDue,
  };
}
