/**
 * What is due: a link's new usage events become billing items, recorded in the database before
 * anything is sent. One sidecar derives a link at a time (its row is locked; the others skip it).
 *
 * Events are found by recorded_at (the database's clock when the row was written), so usage that
 * arrives late (a spool replayed after an outage, a long stream that ended minutes after it
 * began) is billed too: a Stripe minute already derived gets a further item (`<n>` + 1). A pass
 * looks back `lookbackMs` before its watermark, because a row's recorded_at is taken before its
 * commit, and skips the events billing_derived says were derived already.
 */
import type { Db, Queryable } from '../store/types.js';
import { formatBilled, formatScaled, markedUp, nextMicros, toScaled } from './amounts.js';
import { normaliseUsd } from '../money.js';
import type { BillingTarget } from './links.js';

export interface DeriveOptions {
  /** A Stripe minute is derived once it ended this long ago (calls still running are metered when they end). */
  settleMs: number;
  /** How far before its watermark a pass looks for events committed late. */
  lookbackMs: number;
  /** Events derived per statement. */
  batch: number;
}

export const DEFAULT_DERIVE: Readonly<DeriveOptions> = Object.freeze({
  settleMs: 120_000,
  lookbackMs: 60_000,
  batch: 5_000,
});

/** Stripe accepts meter events of the past 35 days; usage older than this (less a margin for the
 *  trip there) is marked expired, never sent. */
export const STRIPE_WINDOW_MS = 35 * 86_400_000 - 3_600_000;

interface LockedLink {
  id: string;
  account_id: string;
  tag_key: string | null;
  tag_value: string | null;
  target: BillingTarget;
  markup_pct: string;
  created_at: Date | string;
  since: Date | string;
  upto: Date | string;
  now: Date | string;
}

interface NewEvent {
  event_id: string;
  time: Date | string;
  recorded_at: Date | string;
  cost: string;
  input_tokens: string;
  output_tokens: string;
  model: string;
  provider: string;
  tags: Record<string, string> | string;
}

const date = (v: Date | string) => (v instanceof Date ? v : new Date(v));
const monthOf = (d: Date) => d.toISOString().slice(0, 7);

/** Derives every link in force; returns the number of events derived. */
export async function deriveAll(db: Db, opts: DeriveOptions): Promise<number> {
  const links = await db.query<{ id: string }>('SELECT id FROM billing_links WHERE unlinked_at IS NULL ORDER BY id');
  let events = 0;
  for (const { id } of links) {
    for (;;) {
      const n = await deriveLink(db, id, opts);
      events += n;
      if (n < opts.batch) break;
    }
  }
  return events;
}

/** One pass over one link, in one transaction: its new events, their items, its watermark.
 *  Returns how many events it derived (0 when another sidecar holds the link). */
export function deriveLink(db: Db, linkId: string, opts: DeriveOptions): Promise<number> {
  return db.transaction(async (tx) => {
    const [link] = await tx.query<LockedLink>(
      `SELECT l.id, l.account_id, l.tag_key, l.tag_value, l.target, l.markup_pct::text AS markup_pct, l.created_at,
              l.derived_to - $2::bigint * interval '1 millisecond' AS since,
              CASE l.target WHEN 'stripe' THEN date_trunc('minute', now() - $3::bigint * interval '1 millisecond')
                            ELSE now() END AS upto,
              now() AS now
         FROM billing_links l
        WHERE l.id = $1 AND l.unlinked_at IS NULL
        FOR UPDATE SKIP LOCKED`,
      [linkId, opts.lookbackMs, opts.settleMs],
    );
    if (!link) return 0;
    const stripe = link.target === 'stripe';
    // Stripe bills money only (a call that cost nothing is no usage); CloudEvents every call.
    const events = await tx.query<NewEvent>(
      `SELECT e.event_id, e.time, e.recorded_at, e.cost::text AS cost, e.input_tokens::text AS input_tokens,
              e.output_tokens::text AS output_tokens, e.model, e.provider, e.tags
         FROM usage_events e
        WHERE e.account_id = $1 AND e.recorded_at >= $2 AND e.time >= $4 AND (NOT $7::boolean OR e.time < $3)
          AND ($5::text IS NULL OR e.tags ->> $5::text = $6::text)
          AND (NOT $7::boolean OR e.cost > 0)
          AND NOT EXISTS (SELECT 1 FROM billing_derived d WHERE d.link_id = $8 AND d.event_id = e.event_id)
        ORDER BY e.recorded_at
        LIMIT $9`,
      [
        link.account_id,
        link.since,
        link.upto,
        link.created_at,
        link.tag_key,
        link.tag_value,
        stripe,
        link.id,
        opts.batch,
      ],
    );
    if (events.length > 0) {
      await tx.query(
        `INSERT INTO billing_derived (link_id, event_id, recorded_at)
         SELECT $1, e.id, e.at FROM unnest($2::uuid[], $3::timestamptz[]) AS e(id, at)`,
        [link.id, events.map((e) => e.event_id), events.map((e) => date(e.recorded_at).toISOString())],
      );
      if (stripe) await recordStripeItems(tx, link, events);
      else await recordCloudEventItems(tx, link, events);
    }
    // Everything recorded before `upto` whose time is before it is derived (Stripe: the minutes that
    // settled; an event's time is never after its recorded_at); a full batch goes on from its last
    // event. Later passes look back from here, and billing_derived skips what they find again.
    const upto = date(link.upto);
    const last = events.at(-1);
    const to =
      events.length < opts.batch || !last ? upto : new Date(Math.min(upto.getTime(), date(last.recorded_at).getTime()));
    await tx.query(
      `WITH moved AS (UPDATE billing_links SET derived_to = greatest(derived_to, $2) WHERE id = $1 RETURNING derived_to)
       DELETE FROM billing_derived d USING moved
        WHERE d.link_id = $1 AND d.recorded_at < moved.derived_to - $3::bigint * interval '1 millisecond'`,
      [link.id, to.toISOString(), 2 * opts.lookbackMs],
    );
    return events.length;
  });
}

/** One item per UTC minute; each minute's value carries the month's rounding remainder forward. */
async function recordStripeItems(tx: Queryable, link: LockedLink, events: NewEvent[]): Promise<void> {
  const costs = new Map<number, bigint>(); // minute start (ms) → cost in 1e-8 USD
  for (const e of events) {
    const minute = Math.floor(date(e.time).getTime() / 60_000) * 60_000;
    costs.set(minute, (costs.get(minute) ?? 0n) + toScaled(e.cost, 8)!);
  }
  const minutes = [...costs.keys()].sort((a, b) => a - b);
  const at = minutes.map((m) => new Date(m).toISOString());
  const months = [...new Set(minutes.map((m) => monthOf(new Date(m))))];
  const seqs = new Map(
    (
      await tx.query<{ at: Date | string; seq: number }>(
        `SELECT at, max(seq) AS seq FROM billing_items WHERE link_id = $1 AND at = ANY($2::timestamptz[]) GROUP BY at`,
        [link.id, at],
      )
    ).map((r) => [date(r.at).getTime(), Number(r.seq)]),
  );
  const carries = new Map(
    (
      await tx.query<{ month: string; billed: string; micros: string }>(
        `SELECT month, billed::text AS billed, micros::text AS micros FROM billing_carry
          WHERE link_id = $1 AND month = ANY($2::text[])`,
        [link.id, months],
      )
    ).map((r) => [r.month, { billed: BigInt(r.billed), micros: BigInt(r.micros) }]),
  );
  const now = date(link.now).getTime();
  const rows = minutes.map((m) => {
    const month = monthOf(new Date(m));
    const cost = costs.get(m)!;
    const billed = markedUp(formatCost(cost), link.markup_pct);
    const next = nextMicros(carries.get(month) ?? { billed: 0n, micros: 0n }, billed);
    carries.set(month, next.carry);
    const lastSecond = m + 59_000;
    return {
      month,
      at: new Date(m).toISOString(),
      seq: (seqs.get(m) ?? 0) + 1,
      cost: formatCost(cost),
      billed: formatBilled(billed),
      micros: next.micros.toString(),
      status: lastSecond < now - STRIPE_WINDOW_MS ? 'expired' : 'pending',
    };
  });
  await tx.query(
    `INSERT INTO billing_items (link_id, month, at, seq, cost, billed, micros, status)
     SELECT $1, r.month, r.at, r.seq, r.cost, r.billed, r.micros, r.status
       FROM unnest($2::text[], $3::timestamptz[], $4::int[], $5::numeric[], $6::numeric[], $7::bigint[], $8::text[])
         AS r(month, at, seq, cost, billed, micros, status)`,
    [
      link.id,
      rows.map((r) => r.month),
      rows.map((r) => r.at),
      rows.map((r) => r.seq),
      rows.map((r) => r.cost),
      rows.map((r) => r.billed),
      rows.map((r) => r.micros),
      rows.map((r) => r.status),
    ],
  );
  // Stored as integers of 1e-14 USD (billed) and micro-dollars: exact, whatever NUMERIC prints.
  await tx.query(
    `INSERT INTO billing_carry (link_id, month, billed, micros)
     SELECT $1, c.month, c.billed, c.micros FROM unnest($2::text[], $3::numeric[], $4::bigint[]) AS c(month, billed, micros)
     ON CONFLICT (link_id, month) DO UPDATE SET billed = excluded.billed, micros = excluded.micros`,
    [
      link.id,
      months,
      months.map((m) => carries.get(m)!.billed.toString()),
      months.map((m) => carries.get(m)!.micros.toString()),
    ],
  );
}

/** One item per usage event, with the fields its CloudEvent carries. */
async function recordCloudEventItems(tx: Queryable, link: LockedLink, events: NewEvent[]): Promise<void> {
  const data = events.map((e) => ({
    input_tokens: Number(e.input_tokens),
    output_tokens: Number(e.output_tokens),
    model: e.model,
    provider: e.provider,
    tags: typeof e.tags === 'string' ? (JSON.parse(e.tags) as Record<string, string>) : e.tags,
  }));
  await tx.query(
    `INSERT INTO billing_items (link_id, month, at, event_id, cost, billed, data)
     SELECT $1, r.month, r.at, r.event_id, r.cost, r.billed, r.data
       FROM unnest($2::text[], $3::timestamptz[], $4::uuid[], $5::numeric[], $6::numeric[], $7::jsonb[])
         AS r(month, at, event_id, cost, billed, data)`,
    [
      link.id,
      events.map((e) => monthOf(date(e.time))),
      events.map((e) => date(e.time).toISOString()),
      events.map((e) => e.event_id),
      events.map((e) => normaliseUsd(e.cost)),
      events.map((e) => formatBilled(markedUp(e.cost, link.markup_pct))),
      data.map((d) => JSON.stringify(d)),
    ],
  );
}

const formatCost = (units: bigint): string => formatScaled(units, 8);
