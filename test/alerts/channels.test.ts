import { createHmac } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import type { AlertChannel, BudgetAlert } from '../../src/alerts/alert.js';
import { sendToChannel } from '../../src/alerts/channels/index.js';
import { httpReceiver, smtpReceiver } from './helpers/receivers.js';

const alert: BudgetAlert = {
  id: '7d1f8a52-3c1e-4a5b-9f7e-2b8c9d0e1f23',
  type: 'budget.threshold',
  account: 'acme',
  month: '2026-11',
  level: 80,
  spend: '80.12345678',
  budget: '100',
  utilization_pct: '80.12',
  top_models: [{ provider: 'openai', model: 'gpt-4o', spend: '70.12345678', requests: '9007199254740993' }],
  top_tags: [{ key: 'team', value: 'search', spend: '50', requests: '12' }],
  created_at: '2026-11-21T10:00:00.000Z',
};
const opts = { timeoutMs: 2_000 };
const channel = (kind: AlertChannel['kind'], target: string, secret: string | null = null): AlertChannel => ({
  id: 'a1b2c3d4e5f6',
  kind,
  target,
  secret,
});

describe('alert channels against real receivers on loopback', () => {
  it('webhook: the contract body with exact money, Meter-Event-Id and a verifiable Meter-Signature', async () => {
    const rx = await httpReceiver();
    const secret = 'whsec_test_0123456789abcdef';
    const r = await sendToChannel(channel('webhook', `${rx.url}/hooks/meter`, secret), alert, opts);
    expect(r).toMatchObject({ ok: true, statusCode: 200 });
    const [req] = rx.received;
    expect(req!.path).toBe('/hooks/meter');
    expect(req!.headers['content-type']).toBe('application/json');
    expect(req!.headers['meter-event-id']).toBe(alert.id);
    // Verify as a receiver would: t=…,v1=HMAC-SHA256("<t>.<raw body>").
    const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(String(req!.headers['meter-signature']));
    expect(m).not.toBeNull();
    expect(Math.abs(Number(m![1]) - Date.now() / 1000)).toBeLessThan(60);
    expect(m![2]).toBe(createHmac('sha256', secret).update(`${m![1]}.${req!.body}`).digest('hex'));
    const body = JSON.parse(req!.body) as Record<string, unknown>;
    expect(Object.keys(body)).toEqual([
      'id',
      'type',
      'account',
      'month',
      'level',
      'spend',
      'budget',
      'utilization_pct',
      'top_models',
      'top_tags',
      'created_at',
    ]);
    expect(body).toMatchObject({
      id: alert.id,
      type: 'budget.threshold',
      account: 'acme',
      month: '2026-11',
      level: 80,
      budget: 100,
    });
    // Money and counters are JSON numbers written from the exact decimal text.
    expect(req!.body).toContain('"spend":80.12345678');
    expect(req!.body).toContain('"utilization_pct":80.12');
    expect(req!.body).toContain('"requests":9007199254740993');
    expect(body.top_tags).toEqual([{ key: 'team', value: 'search', spend: 50, requests: 12 }]);
  });

  it('slack: text plus blocks naming account, level, spend and top models', async () => {
    const rx = await httpReceiver();
    expect((await sendToChannel(channel('slack', `${rx.url}/services/T0/B0/x`), alert, opts)).ok).toBe(true);
    const body = JSON.parse(rx.received[0]!.body) as { text: string; blocks: { type: string }[] };
    expect(body.text).toContain('acme has reached 80%');
    expect(body.blocks.map((b) => b.type)).toEqual(['header', 'section', 'section', 'section', 'context']);
    expect(rx.received[0]!.body).toContain('openai/gpt-4o: $70.12345678');
    expect(rx.received[0]!.body).toContain('team=search');
  });

  it('teams: a message with one Adaptive Card', async () => {
    const rx = await httpReceiver();
    expect((await sendToChannel(channel('teams', `${rx.url}/webhookb2/x`), alert, opts)).ok).toBe(true);
    const body = JSON.parse(rx.received[0]!.body) as {
      type: string;
      attachments: {
        contentType: string;
        content: { type: string; version: string; body: { type: string; facts?: unknown[] }[] };
      }[];
    };
    expect(body.type).toBe('message');
    expect(body.attachments).toHaveLength(1);
    const card = body.attachments[0]!;
    expect(card.contentType).toBe('application/vnd.microsoft.card.adaptive');
    expect(card.content.type).toBe('AdaptiveCard');
    expect(card.content.body[1]).toMatchObject({ type: 'FactSet' });
    expect(JSON.stringify(card.content.body[1]!.facts)).toContain('"value":"80%"');
  });

  it('e-mail: through a real SMTP server with METER_SMTP_URL credentials', async () => {
    const smtp = await smtpReceiver('meter', 'p@ss word');
    const smtpUrl = `smtp://meter:${encodeURIComponent('p@ss word')}@127.0.0.1:${smtp.port}?from=alerts@example.com`;
    const r = await sendToChannel(channel('email', 'ops@example.com'), alert, { ...opts, smtpUrl });
    expect(r).toMatchObject({ ok: true, statusCode: 250 });
    expect(smtp.mails).toHaveLength(1);
    expect(smtp.mails[0]).toMatchObject({ from: 'alerts@example.com', to: ['ops@example.com'], user: 'meter' });
    expect(smtp.mails[0]!.raw).toContain('Subject: Budget alert: acme has reached 80% of its 2026-11 budget');
    expect(smtp.mails[0]!.raw).toMatch(new RegExp(`^Meter-Event-Id: ${alert.id}`, 'im'));
  });

  it('e-mail: a clear error when METER_SMTP_URL is unset, and wrong credentials are not echoed', async () => {
    const unset = await sendToChannel(channel('email', 'ops@example.com'), alert, opts);
    expect(unset).toMatchObject({ ok: false });
    expect(unset.error).toContain('METER_SMTP_URL is not set');
    const smtp = await smtpReceiver('meter', 'right-pass');
    const wrong = await sendToChannel(channel('email', 'ops@example.com'), alert, {
      ...opts,
      smtpUrl: `smtp://meter:wrong-pass-xyz@127.0.0.1:${smtp.port}`,
    });
    expect(wrong.ok).toBe(false);
    expect(wrong.error).toMatch(/^SMTP: /);
    expect(wrong.error).not.toContain('wrong-pass-xyz');
  });

  it('a failing receiver, a refused connection and a silent one are failures that say why', async () => {
    const rx = await httpReceiver(() => 503);
    const failed = await sendToChannel(channel('slack', rx.url), alert, opts);
    expect(failed).toMatchObject({ ok: false, statusCode: 503, error: 'HTTP 503: receiver says no' });

    const closed = await httpReceiver();
    await closed.close();
    const refused = await sendToChannel(channel('webhook', closed.url, 'secret-0123456789ab'), alert, opts);
    expect(refused.ok).toBe(false);
    expect(refused.error).toMatch(/ECONNREFUSED/);

    const silent = createServer(() => {}); // accepts, never answers
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    afterAll(() => {
      silent.closeAllConnections();
      silent.close();
    });
    const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
    const slow = await sendToChannel(channel('teams', url), alert, { timeoutMs: 300 });
    expect(slow).toMatchObject({ ok: false, error: 'no answer within 300 ms' });
  });
});
