/**
 * A budget created, changed or deleted takes effect on a running sidecar within 5 s (CONTRACT
 * §4): the sidecar polls meter_changes, which triggers on the budget tables bump.
 */
import type OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { createAccount } from '../../src/auth/accounts.js';
import { createKey } from '../../src/auth/keys.js';
import { createBudget, deleteBudget, updateBudget } from '../../src/budget/budgets-admin.js';
import { parseScope } from '../../src/budget/scope.js';
import { migrate } from '../../src/store/index.js';
import { openPostgres } from '../../src/store/postgres.js';
import { atFileEnd } from '../helpers/cleanup.js';
import { answerChat, eventually, openaiVia, startFullDaemon } from '../helpers/fleet.js';
import { createTestDatabase, postgresUrl } from '../helpers/stores.js';
import { startFakeUpstream } from '../helpers/upstreams.js';

describe.skipIf(!postgresUrl)('budget changes on a running sidecar', () => {
  it('a new block budget refuses within 5 s; raising it and deleting it admit again', async () => {
    const upstream = await startFakeUpstream();
    answerChat(upstream, { prompt: 1000, completion: 1000 }); // gpt-4o-2024-08-06: $0.0125
    const databaseUrl = await createTestDatabase();
    const db = openPostgres(databaseUrl);
    atFileEnd(() => db.close());
    await migrate(db);
    await createAccount(db, 'live', 'pro');
    const { key } = await createKey(db, 'live');
    const daemon = await startFullDaemon(databaseUrl, upstream);
    const client: OpenAI = openaiVia(daemon, key);
    const status = () =>
      client.chat.completions
        .create(
          { model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] },
          { headers: { 'X-Feature-Name': 'chat' } },
        )
        .then(
          () => 200,
          (e: { status?: number }) => e.status ?? 0,
        );
    expect(await status()).toBe(200);

    const b = await createBudget(db, 'live', {
      amount: '0.01',
      scope: parseScope('tag:feature=chat'),
      action: 'block',
    });
    await eventually(async () => (await status()) === 402, 5_000, 'the new budget refusing');
    await updateBudget(db, b.id, { amount: '5' });
    await eventually(async () => (await status()) === 200, 5_000, 'the raised budget admitting');
    await updateBudget(db, b.id, { amount: '0.01' });
    await eventually(async () => (await status()) === 402, 5_000, 'the lowered budget refusing');
    await deleteBudget(db, b.id);
    await eventually(async () => (await status()) === 200, 5_000, 'the deleted budget admitting');
  }, 60_000);
});
