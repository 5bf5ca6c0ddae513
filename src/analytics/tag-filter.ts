/**
 * How /analytics/events?tag=k:v finds its rows. Walking the account's events newest first and
 * dropping non-matches is fast for a common tag and hopeless for a rare one (a tag another
 * account uses a lot but this one never: every row of the account is read to fill no page).
 * The rollups say how many of the account's calls carried the tag in the window, so:
 *   none   - no call can match: answer without touching usage_events;
 *   scan   - common: walk (account_id, time) and filter;
 *   lookup - rare: fetch exactly the matches through the GIN index on
 *            tags || {"@account": account_id} (sql/003), then sort them.
 */
import { TAG_OVERFLOW_VALUE } from '../store/event-batch.js';
import type { Queryable } from '../store/types.js';

export type TagStrategy = 'none' | 'scan' | 'lookup';

/** The key the GIN expression adds; `@` cannot start a tag key, so no tag can shadow it. */
export const ACCOUNT_TAG_KEY = '@account';
/** Exactly the indexed expression of sql/003, or the index is not used. */
export const ACCOUNT_TAGS_EXPR = `(tags || jsonb_object(ARRAY['${ACCOUNT_TAG_KEY}', account_id::text]))`;

// Upper bound: values past the writer's per-day cap are rolled up under the overflow value.
const ESTIMATE_SQL = `
SELECT
  (SELECT coalesce(sum(requests), 0) FROM usage_tag_daily
    WHERE account_id = $1 AND tag_key = $2 AND tag_value IN ($3, $4)
      AND day BETWEEN coalesce($5::date, '-infinity') AND coalesce($6::date, 'infinity'))::text AS matches,
  (SELECT coalesce(sum(requests), 0) FROM usage_daily
    WHERE account_id = $1 AND day BETWEEN coalesce($5::date, '-infinity') AND coalesce($6::date, 'infinity'))::text AS total`;

/**
 * `fromDay`/`toDay` are the UTC days of the window's ends, inclusive (a superset of it, so a
 * zero is certain). A lookup reads every match; a scan reads about limit / (matches / total)
 * rows: look up when matches² / total is below the page size.
 */
export async function chooseTagStrategy(
  db: Queryable,
  accountId: string,
  tag: { key: string; value: string },
  window: { fromDay?: string; toDay?: string },
  limit: number,
): Promise<TagStrategy> {
  const [row] = await db.query<{ matches: string; total: string }>(ESTIMATE_SQL, [
    accountId,
    tag.key,
    tag.value,
    TAG_OVERFLOW_VALUE,
    window.fromDay ?? null,
    window.toDay ?? null,
  ]);
  const matches = Number(row?.matches ?? 0);
  const total = Number(row?.total ?? 0);
  if (matches === 0) return 'none';
  return (matches * matches) / Math.max(total, 1) < limit + 1 ? 'lookup' : 'scan';
}
