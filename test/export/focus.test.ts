import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { FOCUS_COLUMNS, FOCUS_VERSION } from '../../src/export/focus.js';
import { Pricer } from '../../src/pricing/pricer.js';
import { usageFromStored } from '../../src/store/event-units.js';
import type { UsageEvent } from '../../src/metering/event.js';
import type { Db } from '../../src/store/types.js';
import { createAccount, FixedKeys, startApi, type TestAccount, type TestApi } from '../analytics/helpers/api.js';
import { makeEvent, seedEvents } from '../analytics/helpers/seed.js';
import { tempDirAtFileEnd } from '../helpers/cleanup.js';
import { describeEachBackend } from '../helpers/stores.js';
import { parseCsv } from './csv.js';
import { focusColumns } from './focus-spec.js';

const NOW = new Date('2026-05-14T15:30:00.000Z');
const SPEC = focusColumns();

/** Prices of the test's own (not the catalogue's): a 20% negotiated discount on OpenAI, a
 *  long-context tier on Anthropic. */
const PRICES = {
  providers: {
    openai: {
      models: {
        'acme-gpt': {
          discount_pct: 20,
          input_mtok: '2.5',
          cache_read_mtok: '1.25',
          output_mtok: '10',
          web_searches_kcount: '10',
        },
      },
    },
    anthropic: {
      models: {
        'acme-claude': {
          input_mtok: 3,
          output_mtok: 15,
          tiers: [{ above_input_tokens: 200000, input_mtok: 6, output_mtok: 22.5 }],
        },
      },
    },
  },
};

/** Exact decimal text → units of 1e-8 (costs) for summing. */
const units8 = (v: string) => {
  const [i, f = ''] = v.split('.');
  return BigInt(i!) * 10n ** 8n + BigInt(f.padEnd(8, '0'));
};
/** a × b as exact decimal text, rounded half-even to 8 decimals. */
function product8(a: string, b: string): string {
  const dec = (v: string) => {
    const [i, f = ''] = v.split('.');
    return { coef: BigInt(i! + f), scale: f.length };
  };
  const x = dec(a);
  const y = dec(b);
  const scale = x.scale + y.scale;
  const p = x.coef * y.coef;
  let q = p;
  if (scale > 8) {
    const d = 10n ** BigInt(scale - 8);
    q = p / d;
    const r = p % d;
    if (r * 2n > d || (r * 2n === d && q % 2n === 1n)) q += 1n;
  } else q = p * 10n ** BigInt(8 - scale);
  const s = q.toString().padStart(9, '0');
  return `${s.slice(0, -8)}.${s.slice(-8)}`;
}

describeEachBackend('FOCUS 1.2 export', (backend) => {
  let db: Db;
  let api: TestApi;
  let pro: TestAccount;
  let events: UsageEvent[];
  const saved = process.env.METER_PRICES_FILE;

  beforeAll(async () => {
    const file = join(tempDirAtFileEnd(), 'prices.json');
    writeFileSync(file, JSON.stringify(PRICES));
    process.env.METER_PRICES_FILE = file;
    const pricer = new Pricer({ pricesFile: file });
    db = await backend.open();
    const auth = new FixedKeys();
    pro = await createAccount(db, auth, 'pro');
    api = await startApi(db, auth, NOW);
    const acct = pro.principal.accountId;
    // Each event's cost is what the daemon would have recorded for it.
    const priced = (e: UsageEvent): UsageEvent => {
      const usage = usageFromStored({
        input_tokens: e.inputTokens,
        output_tokens: e.outputTokens,
        cached_input_tokens: e.cachedInputTokens,
        cache_write_tokens: e.cacheWriteTokens,
        reasoning_tokens: e.reasoningTokens,
        units: (e.units ?? null) as Record<string, unknown> | null,
        service_tier: e.serviceTier ?? null,
      });
      const c = pricer.cost({ provider: e.provider, model: e.model, usage, time: new Date(e.time) });
      return { ...e, cost: c.cost, unpriced: c.unpriced };
    };
    events = [
      makeEvent({
        accountId: acct,
        time: '2026-05-14T10:00:00.000Z',
        model: 'acme-gpt',
        inputTokens: 1000,
        cachedInputTokens: 200,
        outputTokens: 300,
        units: { web_searches: 2 },
        tags: { team: 'search' },
      }),
      makeEvent({
        accountId: acct,
        time: '2026-05-14T11:00:00.000Z',
        model: 'acme-gpt',
        inputTokens: 1000,
        cachedInputTokens: 200,
        outputTokens: 300,
        tags: { team: 'search' },
      }),
      makeEvent({ accountId: acct, time: '2026-05-14T12:00:00.000Z', model: 'acme-gpt', serviceTier: 'batch' }),
      makeEvent({
        accountId: acct,
        time: '2026-05-13T08:00:00.000Z',
        provider: 'anthropic',
        model: 'acme-claude',
        inputTokens: 250_000,
        outputTokens: 1000,
      }),
      makeEvent({ accountId: acct, time: '2026-05-13T09:00:00.000Z', provider: 'anthropic', model: 'acme-claude' }),
      // A model meter has no price for, whose name a spreadsheet would run as a formula.
      makeEvent({ accountId: acct, time: '2026-05-12T09:00:00.000Z', provider: 'anthropic', model: '=cmd()' }),
    ].map(priced);
    await seedEvents(db, events);
  });
  afterAll(() => {
    if (saved === undefined) delete process.env.METER_PRICES_FILE;
    else process.env.METER_PRICES_FILE = saved;
  });

  it('columns, nulls, types and allowed values as the specification text defines them; FocusVersion in a header', async () => {
    const r = await api.get('/analytics/export?format=focus', pro.key);
    expect(r.status).toBe(200);
    expect(r.headers.get('x-focus-version')).toBe(FOCUS_VERSION);
    const [header, ...rows] = parseCsv(r.text);
    expect(header).toEqual([...FOCUS_COLUMNS]);
    for (const spec of SPEC.values()) if (spec.level === 'Mandatory') expect(header, spec.id).toContain(spec.id);
    for (const name of header!) expect(SPEC.has(name) || name.startsWith('x_'), name).toBe(true);
    expect(rows.length).toBeGreaterThan(0);
    for (const row of rows) {
      header!.forEach((name, i) => {
        const spec = SPEC.get(name);
        const v = row[i]!;
        if (!spec) return;
        if (!spec.nulls || spec.requiredOnUsage) expect(v, name).not.toBe('');
        if (v === '') return;
        if (spec.type === 'Decimal') expect(v, name).toMatch(/^-?\d+(\.\d+)?$/);
        if (spec.type === 'Date/Time') expect(v, name).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/);
        if (spec.type === 'JSON') expect(typeof JSON.parse(v), name).toBe('object');
        if (spec.values) expect(spec.values, name).toContain(v);
      });
    }
  });

  it('a row per priced unit: unit price × PricingQuantity = cost, ListCost at list price under a discount', async () => {
    const r = await api.get('/analytics/export?format=focus', pro.key);
    const [header, ...rows] = parseCsv(r.text);
    const at = (row: string[], name: string) => row[header!.indexOf(name)]!;
    for (const row of rows) {
      expect(at(row, 'ListCost')).toBe(product8(at(row, 'ListUnitPrice'), at(row, 'PricingQuantity')));
      expect(at(row, 'ContractedCost')).toBe(product8(at(row, 'ContractedUnitPrice'), at(row, 'PricingQuantity')));
      expect(at(row, 'BilledCost')).toBe(at(row, 'ContractedCost'));
      expect(at(row, 'EffectiveCost')).toBe(at(row, 'ContractedCost'));
    }
    // Nothing lost: the rows' billed costs add up to the calls' recorded costs.
    const billed = rows.reduce((s, row) => s + units8(at(row, 'BilledCost')), 0n);
    expect(billed).toBe(events.reduce((s, e) => s + units8(e.cost), 0n));

    const find = (sku: string) => rows.filter((row) => at(row, 'SkuPriceId') === sku);
    // Two standard-tier calls of the same model and tags on 05-14: one row per unit, quantities summed.
    const [input] = find('openai/acme-gpt/input:standard');
    expect(at(input!, 'ChargePeriodStart')).toBe('2026-05-14T00:00:00Z');
    expect(at(input!, 'PricingQuantity')).toBe('0.0016'); // (1000 − 200 cached) × 2 calls
    expect(at(input!, 'PricingUnit')).toBe('1000000 Tokens');
    expect(at(input!, 'ConsumedQuantity')).toBe('1600');
    expect(at(input!, 'ConsumedUnit')).toBe('Tokens');
    expect(at(input!, 'ListUnitPrice')).toBe('2.5');
    expect(at(input!, 'ContractedUnitPrice')).toBe('2');
    expect(at(input!, 'ListCost')).toBe('0.00400000');
    expect(at(input!, 'BilledCost')).toBe('0.00320000');
    expect(at(input!, 'SkuId')).toBe('openai/acme-gpt/input');
    expect(at(input!, 'SkuMeter')).toBe('Input Tokens');
    expect(at(input!, 'x_Requests')).toBe('2');
    expect(JSON.parse(at(input!, 'Tags'))).toEqual({ team: 'search' });
    const [cached] = find('openai/acme-gpt/cache_read:standard');
    expect([at(cached!, 'PricingQuantity'), at(cached!, 'ListUnitPrice')]).toEqual(['0.0004', '1.25']);
    const [search] = find('openai/acme-gpt/web_search:standard');
    expect(at(search!, 'PricingQuantity')).toBe('0.002');
    expect(at(search!, 'PricingUnit')).toBe('1000 Searches');
    expect(at(search!, 'ListCost')).toBe('0.02000000');
    expect(at(search!, 'BilledCost')).toBe('0.01600000');
    // The Batch tier is a price of its own: half the list price.
    const [batch] = find('openai/acme-gpt/input:batch');
    expect([at(batch!, 'ListUnitPrice'), at(batch!, 'ContractedUnitPrice')]).toEqual(['1.25', '1']);
    expect(JSON.parse(at(batch!, 'SkuPriceDetails'))).toEqual({ x_ServiceTier: 'batch' });
    // A long-context call re-prices the whole request: a SKU price of its own.
    const [long] = find('anthropic/acme-claude/input:standard:above-200000');
    expect([at(long!, 'ListUnitPrice'), at(long!, 'PricingQuantity')]).toEqual(['6', '0.25']);
    expect(find('anthropic/acme-claude/input:standard')).toHaveLength(1);
  });

  it('identifiers are never altered by the formula guard; names are; an unpriced model shows at 0', async () => {
    const r = await api.get('/analytics/export?format=focus', pro.key);
    const [header, ...rows] = parseCsv(r.text);
    const at = (row: string[], name: string) => row[header!.indexOf(name)]!;
    const unpriced = rows.filter((row) => at(row, 'ChargePeriodStart') === '2026-05-12T00:00:00Z');
    expect(unpriced.map((row) => at(row, 'SkuMeter')).sort()).toEqual(['Input Tokens', 'Output Tokens']);
    for (const row of unpriced) {
      expect(at(row, 'ResourceId')).toBe('anthropic/=cmd()');
      expect(at(row, 'SkuId')).toMatch(/^anthropic\/=cmd\(\)\/(input|output)$/);
      expect(at(row, 'ResourceName')).toBe("'=cmd()");
      expect([at(row, 'ListUnitPrice'), at(row, 'BilledCost')]).toEqual(['0', '0.00000000']);
      expect(at(row, 'SkuPriceId')).toMatch(/:unpriced$/);
    }
    // Every cell a spreadsheet could run starts with a letter, a digit, '{' or the guard.
    for (const row of rows) for (const v of row) expect(v).not.toMatch(/^[=+\-@\t\r]/);
  });
});
