import { describe, expect, it } from 'vitest';
import { describeConfig, loadConfig } from '../../src/config.js';

describe('billing configuration', () => {
  it('masks the Stripe key in `meter config`, in errors and when serialised', () => {
    const key = 'sk_live_51SecretValue0000000000';
    const entry = describeConfig({ METER_STRIPE_API_KEY: key }).find((e) => e.variable === 'METER_STRIPE_API_KEY');
    expect(entry).toEqual({ variable: 'METER_STRIPE_API_KEY', value: '***', source: 'environment' });
    const config = loadConfig({ METER_STRIPE_API_KEY: key });
    expect(JSON.stringify(config)).not.toContain(key);
    expect(config.billing.stripeApiKey!.reveal()).toBe(key);
    expect(describeConfig({}).find((e) => e.variable === 'METER_STRIPE_EVENT_NAME')).toMatchObject({
      value: 'llm_cost',
      source: 'default',
    });
  });

  it('refuses a bad Stripe setting, naming the variable', () => {
    expect(() => loadConfig({ METER_STRIPE_BASE_URL: 'http://127.0.0.1:12111/v1' })).toThrow(
      /^METER_STRIPE_BASE_URL="http:\/\/127.0.0.1:12111\/v1" is invalid: expected an origin without a path/,
    );
    expect(() => loadConfig({ METER_STRIPE_EVENT_NAME: 'x'.repeat(101) })).toThrow(
      /METER_STRIPE_EVENT_NAME=.* at most 100/,
    );
    expect(() => loadConfig({ METER_BILLING_LEASE_MS: '10' })).toThrow(/METER_BILLING_LEASE_MS="10" is invalid/);
    expect(loadConfig({ METER_STRIPE_BASE_URL: 'http://127.0.0.1:12111/' }).billing.stripeBaseUrl).toBe(
      'http://127.0.0.1:12111',
    );
  });
});
