/**
 * The hard cap of the account budget (`meter budget set --monthly … --hard-cap`) with the
 * Anthropic SDK, calls one at a time, each call's event visible in /analytics/events before the
 * next: the call that takes spend past the amount is the last one admitted, and each alert
 * reaches its channel before the next call, carrying the spend at its crossing. The pulse is
 * slowed to 10 s here: the alerts of a sidecar's own calls must not wait for it.
 */
import Anthropic from '@anthropic-ai/sdk';
import { expect, it } from 'vitest';
import { createAccount } from '../../src/auth/accounts.js';
import { createKey } from '../../src/auth/keys.js';
import { addChannel } from '../../src/alerts/channels-admin.js';
import { setBudget } from '../../src/budget/admin.js';
import { httpReceiver } from '../alerts/helpers/receivers.js';
import { anthropicVia, answerMessages, eventually, startFullDaemon } from '../helpers/fleet.js';
import { describeEachBackend } from '../helpers/stores.js';
import { daemonStore } from './helpers/seed.js';
import { startFakeUpstream } from '../helpers/upstreams.js';

// claude-sonnet-4 at 100 + 160 tokens: $0.0027 a call against $0.01: 27%, 54%, 81%, 108%.
const CROSSINGS: Record<number, { level: number; spend: number }> = {
  2: { level: 50, spend: 0.0054 },
  3: { level: 80, spend: 0.0081 },
  4: { level: 100, spend: 0.0108 },
};

describeEachBackend(
  'alerts and the hard cap, call by call',
  (backend) => {
    it('each alert arrives before the next call with the spend at its crossing; the spent cap admits nothing more', async () => {
      const upstream = await startFakeUpstream();
      answerMessages(upstream, { input: 100, output: 160 });
      const rx = await httpReceiver();
      const { setup, databaseUrl, dataDir } = await daemonStore(backend);
      await createAccount(setup, 'acme', 'pro');
      const { key } = await createKey(setup, 'acme');
      await setBudget(setup, 'acme', '0.01', true);
      await addChannel(setup, 'acme', 'webhook', `${rx.url}/hook`, 'whsec_prompt_test');
      await setup.close();

      const daemon = await startFullDaemon(databaseUrl, upstream, {
        METER_DATA_DIR: dataDir,
        METER_KEY_REFRESH_MS: '10000',
        ...(backend.name === 'timescale' ? { METER_DB_POOL_MAX: '1' } : {}),
      });
      const claude = anthropicVia(daemon, key);
      const events = async () =>
        (
          (await (
            await fetch(`${daemon.url}/analytics/events`, { headers: { authorization: `Bearer ${key}` } })
          ).json()) as { events: unknown[] }
        ).events.length;
      const alerts = () => rx.received.map((r) => JSON.parse(r.body) as { level: number; spend: number });

      for (let call = 1; call <= 4; call++) {
        await claude.messages.create({
          model: 'claude-sonnet-4-20250514',
          max_tokens: 200,
          messages: [{ role: 'user', content: 'hello' }],
        });
        await eventually(async () => (await events()) === call, 5_000, `event ${call} in /analytics/events`);
        const crossing = CROSSINGS[call];
        if (crossing)
          await eventually(
            async () => alerts().length === Object.keys(CROSSINGS).indexOf(String(call)) + 1,
            3_000,
            `the ${crossing.level}% alert`,
          );
      }
      expect(alerts().map((a) => [a.level, a.spend])).toEqual(Object.values(CROSSINGS).map((c) => [c.level, c.spend]));
      const fifth = await claude.messages
        .create({ model: 'claude-sonnet-4-20250514', max_tokens: 200, messages: [{ role: 'user', content: 'hello' }] })
        .then(
          () => undefined,
          (e: unknown) => e as InstanceType<typeof Anthropic.APIError>,
        );
      expect(fifth?.status).toBe(402);
      expect(fifth?.error).toMatchObject({ type: 'error', error: { type: 'budget_exceeded' } });
      expect(upstream.requests).toHaveLength(4);
    }, 120_000);
  },
  { timescale: true },
);
