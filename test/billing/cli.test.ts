/**
 * `meter billing link|list|unlink|status` as a user runs them (one-line errors, exit codes, the
 * JSON of CONTRACT §8), on PostgreSQL and on the embedded store through a daemon's admin API.
 */
import { beforeAll, expect, it } from 'vitest';
import { registerBilling } from '../../cli/commands/billing.js';
import type { StoreRunner } from '../../cli/commands/budget.js';
import type { Db } from '../../src/store/types.js';
import { cliStore, runCli } from '../alerts/helpers/cli.js';
import { describeEachBackend } from '../helpers/stores.js';
import { startFakeStripe } from './fake-stripe.js';
import { accountId, minuteAgo, passUntil, seed, sender } from './helpers.js';

describeEachBackend('meter billing', (backend) => {
  let db: Db;
  let run: StoreRunner;
  let acme: string;
  const meter = (...args: string[]) => runCli(args, run, [registerBilling]);
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    ({ db, run } = await cliStore(backend, { METER_STRIPE_API_KEY: 'sk_test_cliKey0000000000' }));
    acme = await accountId(db, 'acme');
  });

  it('link --json: a Stripe customer for one tenant, a CloudEvents receiver for the account', async () => {
    const s = await meter(
      'billing',
      'link',
      '--account',
      'acme',
      '--tag',
      'tenant=globex',
      '--stripe-customer',
      'cus_Globex1',
      '--markup-pct',
      '20',
      '--json',
    );
    expect(s.code, s.stderr).toBe(0);
    const link = JSON.parse(s.stdout) as Record<string, unknown>;
    expect(Object.keys(link)).toEqual(['id', 'account', 'tag', 'target', 'customer', 'markup_pct', 'created_at']);
    expect(link).toMatchObject({ account: 'acme', tag: 'tenant=globex', target: 'stripe', customer: 'cus_Globex1' });
    expect(s.stdout).toContain('"markup_pct":20,');
    ids.stripe = link.id as string;

    const c = await meter(
      'billing',
      'link',
      '--account',
      'acme',
      '--cloudevents-url',
      'https://openmeter.example.com/api/v1/events?token=hush',
      '--json',
    );
    expect(c.code, c.stderr).toBe(0);
    const ce = JSON.parse(c.stdout) as Record<string, unknown>;
    expect(ce).toMatchObject({ tag: null, target: 'cloudevents', subject: 'acme', markup_pct: 0 });
    // A token in the receiver's address is a credential: never printed.
    expect(ce.url).toBe('https://openmeter.example.com/api/v1/events?token=***');
    expect(ce.customer).toBeUndefined();
    ids.ce = ce.id as string;

    const text = await meter(
      'billing',
      'link',
      '--account',
      'acme',
      '--tag',
      'tenant=initech',
      '--stripe-customer',
      'cus_Ini1',
    );
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^linked bl[0-9a-f]{12}: acme tenant=initech → Stripe customer cus_Ini1, markup 0%\n/);
  });

  it('refuses bad flags with exit 2, naming the flag; an unknown account with exit 1', async () => {
    const cases: [string[], RegExp][] = [
      [['--account', 'acme'], /exactly one of --stripe-customer cus_… and --cloudevents-url URL/],
      [['--account', 'acme', '--stripe-customer', 'cus_A1', '--cloudevents-url', 'https://x.example'], /exactly one/],
      [['--account', 'acme', '--stripe-customer', 'acct_1'], /--stripe-customer "acct_1" is not a Stripe customer id/],
      [['--account', 'acme', '--stripe-customer', 'cus_A1', '--markup-pct', '-5'], /--markup-pct "-5" is invalid/],
      [['--account', 'acme', '--stripe-customer', 'cus_A1', '--tag', 'tenant'], /--tag "tenant" is invalid/],
      [
        ['--account', 'acme', '--cloudevents-url', 'ftp://x.example'],
        /--cloudevents-url "ftp:\/\/x.example\/?" is not/,
      ],
      [['--account', 'acme', '--stripe-customer', 'cus_A1', '--subject', 's'], /--subject goes with --cloudevents-url/],
    ];
    for (const [args, message] of cases) {
      const r = await meter('billing', 'link', ...args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toMatch(message);
    }
    const unknown = await meter('billing', 'link', '--account', 'nobody', '--stripe-customer', 'cus_A1');
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/unknown account "nobody"/);
    const month = await meter('billing', 'status', '--month', '2026-13');
    expect(month.code).toBe(2);
    expect(month.stderr).toMatch(/--month "2026-13" is invalid: expected YYYY-MM/);
  });

  it('list --json, status --json with what was sent, unlink', async () => {
    const list = await meter('billing', 'list', '--account', 'acme', '--json');
    expect(list.code).toBe(0);
    const { links } = JSON.parse(list.stdout) as { links: { id: string }[] };
    expect(links.map((l) => l.id)).toEqual(expect.arrayContaining([ids.stripe, ids.ce]));

    const stripe = await startFakeStripe();
    await db.query(`UPDATE billing_links SET created_at = now() - interval '1 hour' WHERE id = $1`, [ids.stripe]);
    const at = minuteAgo(3);
    await seed(db, acme, [{ at: at + 1_000, cost: '0.0020676', tags: { tenant: 'globex' } }]);
    const { sender: s } = sender(db, stripe);
    await passUntil(s, () => stripe.accepted.length === 1);

    const month = new Date(at).toISOString().slice(0, 7);
    const st = await meter('billing', 'status', '--account', 'acme', '--month', month, '--json');
    expect(st.code, st.stderr).toBe(0);
    const status = JSON.parse(st.stdout) as { links: Record<string, unknown>[] };
    const globex = status.links.find((l) => l.id === ids.stripe)!;
    expect(Object.keys(globex)).toEqual([
      'id',
      'account',
      'tag',
      'target',
      'customer',
      'markup_pct',
      'month',
      'metered_usd',
      'billed_usd',
      'sent_usd',
      'pending_usd',
      'expired_usd',
      'failed',
      'last_error',
    ]);
    // Money as exact JSON numbers: 0.0020676 × 1.2 = 0.00248112, 2481 µ$ sent, 0.12 µ$ carried.
    expect(st.stdout).toContain('"metered_usd":0.0020676,"billed_usd":0.00248112,"sent_usd":0.002481,');
    expect(st.stdout).toContain('"pending_usd":0.00000012,"expired_usd":0,"failed":[],"last_error":null');
    expect(status.links.find((l) => l.id === ids.ce)).toMatchObject({ target: 'cloudevents', subject: 'acme' });

    const text = await meter('billing', 'status', '--account', 'acme', '--month', month);
    expect(text.stdout).toContain(`${ids.stripe}  acme tenant=globex → Stripe customer cus_Globex1, markup 20%`);
    expect(text.stdout).toContain('  pending  $0.00000012\n');

    const gone = await meter('billing', 'unlink', ids.ce!);
    expect(gone.code).toBe(0);
    expect(gone.stdout).toMatch(/^unlinked bl[0-9a-f]{12}: acme → CloudEvents https:\/\/openmeter\.example\.com/);
    const again = await meter('billing', 'unlink', ids.ce!);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/no billing link with id/);
    const after = JSON.parse((await meter('billing', 'list', '--json')).stdout) as { links: { id: string }[] };
    expect(after.links.map((l) => l.id)).not.toContain(ids.ce);
  });
});
