/**
 * CloudEvents 1.0 batches from stored usage, against a fake receiver: one event per metered call
 * with the usage event's id, the fields of CONTRACT §8 and exact money strings; retries on 5xx and
 * 429 without a duplicate; a refusal recorded as failed with the receiver's message.
 */
import { beforeAll, expect, it } from 'vitest';
import type { Db } from '../../src/store/types.js';
import { billingStatus } from '../../src/billing/status.js';
import { describeEachBackend } from '../helpers/stores.js';
import { startFakeCloudEvents } from './fake-cloudevents.js';
import { accountId, linkSince, minuteAgo, passUntil, seed, sender } from './helpers.js';

describeEachBackend('billing to a CloudEvents receiver', (backend) => {
  let db: Db;
  beforeAll(async () => {
    db = await backend.open();
  });

  it('sends one CloudEvent per call, batched, exactly once through a 503 and a 429', async () => {
    const receiver = await startFakeCloudEvents();
    const acct = await accountId(db, 'acme');
    const link = await linkSince(db, {
      account: 'acme',
      tag: { key: 'tenant', value: 'initech' },
      target: 'cloudevents',
      url: receiver.url,
      markupPct: '10',
    });
    const at = minuteAgo(2);
    const initech = { tenant: 'initech', feature: 'chat' };
    const events = await seed(db, acct, [
      { at: at + 1_000, cost: '0.0012345', tags: initech },
      { at: at + 2_000, cost: '0', tags: initech }, // a provider error: a metered call all the same
      { at: at + 3_000, cost: '0.00000001', tags: initech },
      { at: at + 4_000, cost: '0.5', tags: { tenant: 'globex' } },
    ]);
    receiver.plan({ status: 503 }, { status: 429, retryAfterS: 1 });
    const { sender: s } = sender(db);
    await passUntil(s, () => receiver.events.length === 3);
    await s.pass();

    expect(receiver.duplicates).toBe(0);
    expect(receiver.batches).toBe(1);
    const byId = new Map(receiver.events.map((e) => [e.id, e]));
    expect([...byId.keys()].sort()).toEqual(
      events
        .slice(0, 3)
        .map((e) => e.id)
        .sort(),
    );
    expect(byId.get(events[0]!.id)).toEqual({
      specversion: '1.0',
      id: events[0]!.id,
      source: 'meter',
      type: 'meter.llm.usage',
      subject: 'initech',
      time: new Date(at + 1_000).toISOString(),
      datacontenttype: 'application/json',
      data: {
        cost_usd: '0.0012345',
        billed_usd: '0.00135795',
        input_tokens: 100,
        output_tokens: 20,
        model: 'gpt-4o-mini',
        provider: 'openai',
        tags: initech,
      },
    });
    expect(byId.get(events[1]!.id)!.data).toMatchObject({ cost_usd: '0', billed_usd: '0' });
    expect(byId.get(events[2]!.id)!.data).toMatchObject({ cost_usd: '0.00000001', billed_usd: '0.000000011' });

    const [st] = await billingStatus(db, new Date(at).toISOString().slice(0, 7), 'acme');
    expect(st).toMatchObject({
      id: link.id,
      target: 'cloudevents',
      url: receiver.url,
      subject: 'initech',
      metered_usd: '0.00123451',
      billed_usd: '0.001357961',
      sent_usd: '0.001357961',
      pending_usd: '0',
      failed: [],
      last_error: null,
    });
  });

  it('records a refusal as failed with the receiver’s message, and sends it no more', async () => {
    const receiver = await startFakeCloudEvents();
    const acct = await accountId(db, 'umbrella');
    await linkSince(db, {
      account: 'umbrella',
      target: 'cloudevents',
      url: receiver.url,
      subject: 'umbrella-eu',
      markupPct: '0',
    });
    await seed(db, acct, [{ at: minuteAgo(2), cost: '0.25' }]);
    receiver.plan({ status: 400, body: '{"title":"Bad Request","detail":"invalid event"}' });
    const { sender: s } = sender(db);
    const month = new Date(minuteAgo(2)).toISOString().slice(0, 7);
    await passUntil(s, async () => (await billingStatus(db, month, 'umbrella'))[0]!.failed.length === 1);
    await s.pass();
    const [st] = await billingStatus(db, month, 'umbrella');
    expect(st!.failed[0]).toMatchObject({
      usd: '0.25',
      error: 'CloudEvents: HTTP 400: {"title":"Bad Request","detail":"invalid event"}',
    });
    expect(st).toMatchObject({ subject: 'umbrella-eu', sent_usd: '0', pending_usd: '0.25' });
    expect(receiver.events).toHaveLength(0);
    expect(receiver.batches).toBe(0);
  });
});
