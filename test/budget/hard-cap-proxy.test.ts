import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { setBudget } from '../../src/budget/admin.js';
import { formatUnits, toUnits } from '../../src/money.js';
import { eventually, openaiVia, startFleet } from '../helpers/fleet.js';
import { postgresUrl } from '../helpers/stores.js';

// gpt-4o: $2.50 / MTok input, $10 / MTok output. Each call really uses 100 + 400 tokens: $0.00425.

const call = (client: OpenAI) =>
  client.chat.completions.create({ model: 'gpt-4o', max_tokens: 500, messages: [{ role: 'user', content: 'hello' }] });

describe.skipIf(!postgresUrl)('the Pro hard cap through the proxy', () => {
  it('reserves a body too large to read whole at a token a byte plus the model window, so nothing else fits beside it', async () => {
    // 5 MiB of body at a token a byte is $13.11 of gpt-4o input, and its output limit is unknown
    // (max_tokens is past what is read), so the model's 128k window: $1.28. With a budget a cent
    // below that worst case, the big call is admitted (nothing is spent: any room admits) and,
    // while it runs, holds more than the whole amount: a small call gets 402.
    const huge = 'x'.repeat(5 * 1024 * 1024);
    const body = JSON.stringify({ model: 'gpt-4o', max_tokens: 10, messages: [{ role: 'user', content: huge }] });
    const bytes = Buffer.byteLength(body);
    const worst = toUnits(String(bytes * 2.5)) / 1_000_000n + toUnits('1.28');
    const budget = formatUnits(worst - toUnits('0.01'));
    const {
      key,
      upstream,
      daemons: [daemon],
    } = await startFleet({
      account: 'big',
      plan: 'pro',
      sidecars: 1,
      usage: { prompt: 100, completion: 400 },
      delayMs: 600,
      setup: (db) => setBudget(db, 'big', budget, true),
    });
    const client = openaiVia(daemon!, key);
    const big = fetch(`${daemon!.url}/proxy/openai/v1/chat/completions`, {
      method: 'POST',
      headers: { 'x-meter-key': key, authorization: 'Bearer sk-provider', 'content-type': 'application/json' },
      body,
    });
    await eventually(async () => upstream.requests.length === 1, 10_000, 'the big call reached the provider');
    const err = await call(client).then(
      () => undefined,
      (e: unknown) => e as InstanceType<typeof OpenAI.APIError>,
    );
    expect(err?.status).toBe(402);
    expect((await big).status).toBe(200); // it ends costing $0.00425: the reservation is released
    await expect(call(client)).resolves.toMatchObject({ usage: { prompt_tokens: 100 } });
    expect(upstream.requests).toHaveLength(2);
  });
});
