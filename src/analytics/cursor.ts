/**
 * The events cursor: the (time, event_id) of the last event of a page, opaque to clients
 * (base64url). The time keeps PostgreSQL's microseconds: a millisecond JS Date would skip or
 * repeat events whose times differ below a millisecond.
 */

export interface EventsCursor {
  /** `YYYY-MM-DDTHH:MM:SS.ffffffZ`, exactly as stored. */
  time: string;
  eventId: string;
}

const TIME_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function encodeCursor(cursor: EventsCursor): string {
  return Buffer.from(`${cursor.time}|${cursor.eventId}`, 'utf8').toString('base64url');
}

/** undefined when the text is not a cursor this service issued. */
export function decodeCursor(text: string): EventsCursor | undefined {
  if (!/^[A-Za-z0-9_-]{1,200}$/.test(text)) return undefined;
  const [time, eventId, extra] = Buffer.from(text, 'base64url').toString('utf8').split('|');
  if (extra !== undefined || !time || !eventId || !TIME_RE.test(time) || !UUID_RE.test(eventId)) return undefined;
  if (Number.isNaN(Date.parse(time))) return undefined;
  return { time, eventId };
}
