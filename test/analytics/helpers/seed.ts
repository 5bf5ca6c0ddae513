/**
 * Test seeding through the batch writer's own statement (src/store/event-batch.ts): events and
 * their usage_daily / usage_tag_daily rows in one statement, replays are no-ops.
 */
import { randomUUID } from 'node:crypto';
import type { UsageEvent } from '../../../src/metering/event.js';
import { insertBatch } from '../../../src/store/event-batch.js';
import type { Db } from '../../../src/store/types.js';

/** Writes events (in writer-sized batches) with their rollups; returns how many were new. */
export async function seedEvents(db: Db, events: UsageEvent[]): Promise<number> {
  let inserted = 0;
  for (let i = 0; i < events.length; i += 500) inserted += (await insertBatch(db, events.slice(i, i + 500))).inserted;
  return inserted;
}

/** A complete event with plausible defaults. */
export function makeEvent(over: Partial<UsageEvent> & Pick<UsageEvent, 'accountId' | 'time'>): UsageEvent {
  return {
    id: randomUUID(),
    keyId: '000000000000',
    provider: 'openai',
    model: 'gpt-4o-mini',
    requestedModel: 'gpt-4o-mini',
    status: 200,
    inputTokens: 100,
    outputTokens: 20,
    cachedInputTokens: 0,
    cacheWriteTokens: 0,
    reasoningTokens: 0,
    cost: '0.00002700',
    unpriced: false,
    priceVersion: 'genai-prices@0.1.8',
    usageSource: 'provider',
    latencyMs: 123.5,
    ttfbMs: 45.25,
    stream: false,
    tags: {},
    providerCostTicks: null,
    ...over,
  };
}
