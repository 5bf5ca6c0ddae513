/**
 * What `meter top` polls, and how it keeps what it polled. Each refresh runs a few indexed
 * statements (src/top/statements.ts): the month's rollups for one account (spend, budget, by
 * model, by tag) and the events recorded since a cursor. Nothing is re-read whole: the per-minute
 * spend of the last hour is aggregated once at start, then grown from the new events.
 *
 * The cursor is on recorded_at (when the row was written), not on `time` (when the call
 * arrived): an LLM call is written when it ends, often seconds after calls that arrived later,
 * and a cursor on arrival time would skip it. Rows of concurrent writers commit slightly out of
 * recorded_at order, so each poll re-reads the last SETTLE_MS of recorded_at and skips the ids
 * it has already seen (a few hundred ids at 200 calls/s).
 */
import { stringTags } from '../../src/tags.js';
import type { TopSource } from '../../src/top/statements.js';
import { toUnits } from '../../src/money.js';
import { currentMonth } from '../../src/calendar.js';
import type { BudgetView } from '../../src/top/budgets.js';
import {
  addToBuckets,
  deriveFigures,
  MS_PER_MINUTE,
  SPARK_MINUTES,
  type Figures,
  type MinuteBuckets,
  type ModelRow,
  type MonthRow,
  type ReconciliationRow,
  type TagRow,
  type TopEvent,
} from './derive.js';

import { MeterError } from '../../src/errors.js';

interface Account {
  id: string;
  name: string;
  plan: string;
}

interface EventRow {
  event_id: string;
  recorded_us: string;
  time_us: string;
  provider: string;
  model: string;
  status: number;
  input_tokens: string;
  output_tokens: string;
  cost: string;
  usage_source: string;
  unpriced: boolean;
  latency_ms: number;
  tags: Record<string, unknown>;
}

export interface TopOptions {
  account?: string;
  intervalS: number;
  /** The recent window of calls/s, errors, latency (seconds). */
  windowS?: number;
  /** Newest calls kept for the tail. */
  tailSize?: number;
  /** Rows shown by model and by tag. */
  groupRows?: number;
  /** Local clock (tests). */
  now?: () => number;
}

const SETTLE_MS = 2_000;
/** Most new events read per refresh; a burst beyond it is read by the next refreshes. */
const BATCH = 5_000;
/** Most events read at start for the window and tail. */
const START_EVENTS = 20_000;
/** The tag keys in use are re-read this often. */
const TAG_KEYS_EVERY_MS = 30_000;

function toEvent(r: EventRow): TopEvent {
  return {
    id: r.event_id,
    recordedUs: Number(r.recorded_us),
    timeMs: Number(r.time_us) / 1000,
    provider: r.provider,
    model: r.model,
    status: r.status,
    inputTokens: String(r.input_tokens),
    outputTokens: String(r.output_tokens),
    cost: toUnits(r.cost),
    usageSource: r.usage_source,
    unpriced: r.unpriced,
    latencyMs: r.latency_ms,
    tags: stringTags(r.tags),
  };
}

export class TopData {
  private accounts: Account[] = [];
  private accountIndex = 0;
  private tagKeys: string[] = [];
  private tagKey: string | null = null;
  private tagKeysAt = 0;
  private buckets: MinuteBuckets = new Map();
  /** Recent events, oldest recorded first. */
  private events: TopEvent[] = [];
  /** Lower bound (exclusive) of the next poll, µs of recorded_at. */
  private floorUs = 0;
  /** Ids recorded after floorUs that were already read. */
  private seen = new Map<string, number>();
  private newestUs = 0;
  /** Database clock minus local clock, ms. */
  private skewMs = 0;
  private readonly windowS: number;
  private readonly tailSize: number;
  private readonly groupRows: number;
  private readonly now: () => number;

  constructor(
    private readonly source: TopSource,
    private readonly opts: TopOptions,
  ) {
    this.windowS = opts.windowS ?? 60;
    this.tailSize = opts.tailSize ?? 100;
    this.groupRows = opts.groupRows ?? 20;
    this.now = opts.now ?? Date.now;
  }

  /** Reads the accounts and starts on `--account`, or the first one. */
  async start(): Promise<void> {
    this.accounts = await this.source.run<Account>('top.accounts', []);
    if (this.accounts.length === 0) {
      throw new TopDataError('no accounts yet: create one with `meter accounts create <name>`');
    }
    if (this.opts.account !== undefined) {
      const i = this.accounts.findIndex((a) => a.name === this.opts.account);
      if (i < 0)
        throw new TopDataError(`--account "${this.opts.account}": no such account (see \`meter accounts list\`)`);
      this.accountIndex = i;
    }
    await this.load();
  }

  get account(): Account {
    return this.accounts[this.accountIndex]!;
  }

  /** The `a` key: the next account (reloads its history). The list is read again, so an
   *  account created after `meter top` started joins the cycle. */
  async nextAccount(): Promise<void> {
    const current = this.account.id;
    const accounts = await this.source.run<Account>('top.accounts', []);
    if (accounts.length > 0) this.accounts = accounts;
    const at = this.accounts.findIndex((a) => a.id === current); // -1: it was deleted
    if (this.accounts.length < 2 && at === 0) return;
    this.accountIndex = (at + 1) % this.accounts.length;
    await this.load();
  }

  /** The `t` key: the next tag key in use this month. */
  nextTagKey(): void {
    if (this.tagKeys.length === 0) return;
    const i = this.tagKey === null ? -1 : this.tagKeys.indexOf(this.tagKey);
    this.tagKey = this.tagKeys[(i + 1) % this.tagKeys.length]!;
  }

  private dbNowMs(): number {
    return this.now() + this.skewMs;
  }

  /** Starts on the current account: the last hour per minute, the recent events, the cursor. */
  private async load(): Promise<void> {
    const id = this.account.id;
    this.buckets = new Map();
    this.events = [];
    this.seen = new Map();
    this.tagKey = null;
    this.tagKeysAt = 0;
    await this.readMonth();
    const t = Math.floor(this.dbNowMs() * 1000);
    const hourAgo = t - SPARK_MINUTES * MS_PER_MINUTE * 1000;
    const [minutes, recent] = await Promise.all([
      this.source.run<{ minute: string; spend: string; calls: string }>('top.minutes', [
        id,
        String(hourAgo),
        String(t),
      ]),
      this.source.run<EventRow>('top.events_before', [
        id,
        String(t - this.windowS * 1_000_000),
        String(t),
        START_EVENTS,
      ]),
    ]);
    for (const m of minutes) addToBuckets(this.buckets, Number(m.minute), toUnits(m.spend), Number(m.calls));
    let events = recent.map(toEvent).reverse();
    if (events.length < this.tailSize) {
      // A quiet account: the tail still shows its newest calls, however old.
      const older = await this.source.run<EventRow>('top.events_before', [id, '0', String(t), this.tailSize]);
      events = older.map(toEvent).reverse();
    }
    this.events = events;
    this.floorUs = t - SETTLE_MS * 1000;
    this.newestUs = t;
    for (const e of events) if (e.recordedUs > this.floorUs) this.seen.set(e.id, e.recordedUs);
  }

  private month: MonthRow = { spend: '0', requests: '0', budget: null, hard_cap: false, levels_fired: [] };
  private byModel: ModelRow[] = [];
  private byTag: TagRow[] = [];
  private reconciliation: ReconciliationRow[] = [];
  private budgets: BudgetView[] = [];

  private async readMonth(): Promise<void> {
    const w = currentMonth(new Date(this.dbNowMs()));
    const asked = this.now();
    const [row] = await this.source.run<MonthRow & { db_now_us: string }>('top.month', [
      this.account.id,
      w.from,
      w.to,
      w.month,
    ]);
    if (!row) throw new TopDataError(`account "${this.account.name}" no longer exists`);
    // The database's clock decides every window (recorded_at is written by it).
    this.skewMs = Number(row.db_now_us) / 1000 - (asked + this.now()) / 2;
    this.month = row;
  }

  /** New events since the cursor, into the buckets and the recent list. */
  private async poll(): Promise<void> {
    const rows = await this.source.run<EventRow>('top.events_since', [
      this.account.id,
      String(this.floorUs),
      [...this.seen.keys()],
      BATCH,
    ]);
    for (const r of rows) {
      const e = toEvent(r);
      if (this.seen.has(e.id)) continue;
      this.seen.set(e.id, e.recordedUs);
      addToBuckets(this.buckets, Math.floor(e.recordedUs / 1000 / MS_PER_MINUTE), e.cost, 1);
      this.events.push(e);
      if (e.recordedUs > this.newestUs) this.newestUs = e.recordedUs;
    }
    // Rows arrive in recorded order per poll; a late commit can be older than the last one kept.
    if (rows.length > 0) this.events.sort((a, b) => a.recordedUs - b.recordedUs);
    this.floorUs = Math.max(this.floorUs, this.newestUs - SETTLE_MS * 1000);
    for (const [id, us] of this.seen) if (us <= this.floorUs) this.seen.delete(id);
    this.prune();
  }

  private prune(): void {
    const windowStart = (this.dbNowMs() - this.windowS * 1000) * 1000;
    let drop = 0;
    while (drop < this.events.length - this.tailSize && this.events[drop]!.recordedUs <= windowStart) drop++;
    if (drop > 0) this.events.splice(0, drop);
    const oldest = Math.floor(this.dbNowMs() / MS_PER_MINUTE) - SPARK_MINUTES;
    for (const m of this.buckets.keys()) if (m <= oldest) this.buckets.delete(m);
  }

  /** One refresh: the month's rollups, the new events; returns the figures. */
  async refresh(): Promise<Figures> {
    await this.readMonth();
    const id = this.account.id;
    const w = currentMonth(new Date(this.dbNowMs()));
    if (this.now() - this.tagKeysAt >= TAG_KEYS_EVERY_MS) {
      this.tagKeys = (await this.source.run<{ tag_key: string }>('top.tag_keys', [id, w.from, w.to])).map(
        (r) => r.tag_key,
      );
      this.tagKeysAt = this.now();
      if (this.tagKey === null || !this.tagKeys.includes(this.tagKey)) this.tagKey = this.tagKeys[0] ?? null;
    }
    const tagKey = this.tagKey;
    const [byModel, byTag, reconciliation, budgets] = await Promise.all([
      this.source.run<ModelRow>('top.by_model', [id, w.from, w.to, this.groupRows]),
      tagKey === null
        ? Promise.resolve([])
        : this.source.run<TagRow>('top.by_tag', [id, w.from, w.to, tagKey, this.groupRows]),
      // A store from before reconciliation (no results table) shows no drift line.
      this.source.run<ReconciliationRow>('top.reconciliation', [id, w.from, w.to]).catch(() => []),
      this.source.budgets ? this.source.budgets(this.account.name) : Promise.resolve([]),
      this.poll(),
    ]);
    this.budgets = budgets;
    this.byModel = byModel;
    this.byTag = byTag;
    this.reconciliation = reconciliation;
    return this.figures();
  }

  /** The figures from what was read last (no query): a changed tag key shows at the next refresh. */
  figures(): Figures {
    return deriveFigures({
      account: this.account.name,
      plan: this.account.plan,
      accounts: this.accounts.map((a) => a.name),
      nowMs: this.dbNowMs(),
      intervalS: this.opts.intervalS,
      windowS: this.windowS,
      month: this.month,
      byModel: this.byModel,
      tagKey: this.tagKey,
      tagKeys: this.tagKeys,
      byTag: this.byTag,
      buckets: this.buckets,
      events: this.events,
      tailSize: this.tailSize,
      reconciliation: this.reconciliation,
      budgets: this.budgets,
    });
  }

  close(): Promise<void> {
    return this.source.close();
  }
}

/** A user-facing problem (no account, unknown account): one line, exit 1. */
export class TopDataError extends MeterError {
  override name = 'TopDataError';
}
