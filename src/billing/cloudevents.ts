/**
 * CloudEvents 1.0 in the JSON batch format (`application/cloudevents-batch+json`, what OpenMeter
 * and other metering services ingest): one event per metered call, its `id` the usage event's id,
 * so a receiver drops a batch it has seen (CloudEvents: `source` + `id` identify an event).
 */
import { postJson } from '../alerts/channels/http.js';
import { maskUrlsIn } from '../config.js';
import { subjectOf } from './links.js';
import type { ClaimedItem, Outcome } from './outbox.js';

export const CLOUDEVENTS_BATCH = 'application/cloudevents-batch+json';

export interface LlmUsageCloudEvent {
  specversion: '1.0';
  id: string;
  source: 'meter';
  type: 'meter.llm.usage';
  subject: string;
  time: string;
  datacontenttype: 'application/json';
  data: {
    cost_usd: string;
    billed_usd: string;
    input_tokens: number;
    output_tokens: number;
    model: string;
    provider: string;
    tags: Record<string, string>;
  };
}

/** The CloudEvent of one item (money as exact decimal strings). */
export function cloudEventOf(item: ClaimedItem): LlmUsageCloudEvent {
  const d = item.data as Omit<LlmUsageCloudEvent['data'], 'cost_usd' | 'billed_usd'>;
  return {
    specversion: '1.0',
    id: item.event_id!,
    source: 'meter',
    type: 'meter.llm.usage',
    subject: subjectOf(item),
    time: item.at.toISOString(),
    datacontenttype: 'application/json',
    data: {
      cost_usd: item.cost,
      billed_usd: item.billed,
      input_tokens: d.input_tokens,
      output_tokens: d.output_tokens,
      model: d.model,
      provider: d.provider,
      tags: d.tags,
    },
  };
}

/** POSTs one link's items as one batch; 2xx acknowledges them all. */
export async function sendCloudEvents(url: string, items: ClaimedItem[], timeoutMs: number): Promise<Outcome> {
  const body = JSON.stringify(items.map(cloudEventOf));
  const r = await postJson(url, body, { 'content-type': CLOUDEVENTS_BATCH, 'user-agent': 'meter-billing' }, timeoutMs);
  if (r.ok) return { kind: 'sent' };
  // The receiver's address may carry a token: never in a stored error.
  const error = maskUrlsIn(`CloudEvents: ${r.error ?? 'failed'}`);
  const status = r.statusCode;
  if (status === undefined || status >= 500 || status === 429) {
    return { kind: 'retry', error, ...(r.retryAfterS !== undefined ? { retryAfterMs: r.retryAfterS * 1000 } : {}) };
  }
  return { kind: 'failed', error };
}
