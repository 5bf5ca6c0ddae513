import type { Command } from 'commander';
import { printable } from '../../src/printable.js';
import { parseMarkupPct } from '../../src/billing/amounts.js';
import { parseTag, validateCustomer, validateReceiverUrl, type LinkView } from '../../src/billing/links.js';
import type { LinkStatus } from '../../src/billing/status.js';
import { raw, type JsonValue } from '../../src/money.js';
import { printJson, printTable, UsageError, withStore, asUsage } from '../context.js';
import type { StoreRunner } from './budget.js';

const out = (line: string) => process.stdout.write(`${printable(line)}\n`);

interface LinkOptions {
  account: string;
  tag?: string;
  stripeCustomer?: string;
  cloudeventsUrl?: string;
  subject?: string;
  markupPct?: string;
  json?: boolean;
}

/** A link as CONTRACT §8 prints it: markup_pct a JSON number. */
const linkJson = (l: LinkView): JsonValue => ({ ...l, markup_pct: raw(l.markup_pct) });

/** Status with money as exact JSON numbers. */
const statusJson = (s: LinkStatus): JsonValue => ({
  ...s,
  markup_pct: raw(s.markup_pct),
  metered_usd: raw(s.metered_usd),
  billed_usd: raw(s.billed_usd),
  sent_usd: raw(s.sent_usd),
  pending_usd: raw(s.pending_usd),
  expired_usd: raw(s.expired_usd),
  failed: s.failed.map((f) => ({ ...f, usd: raw(f.usd) })),
});

const where = (l: Pick<LinkView, 'target' | 'customer' | 'url' | 'subject'>) =>
  l.target === 'stripe' ? `Stripe customer ${l.customer}` : `CloudEvents ${l.url} (subject ${l.subject})`;
const what = (l: Pick<LinkView, 'account' | 'tag'>) => (l.tag ? `${l.account} ${l.tag}` : l.account);

export function registerBilling(program: Command, run: StoreRunner = withStore): void {
  const billing = program
    .command('billing')
    .description("send an account's (or one tenant's) metered cost to Stripe or a CloudEvents receiver");

  billing
    .command('link')
    .description('bill an account, or one tag value of it, through Stripe meter events or CloudEvents')
    .requiredOption('--account <name>', 'the account')
    .option('--tag <k=v>', 'only the usage with this tag value (a tenant: tenant=globex)')
    .option('--stripe-customer <cus_id>', 'the Stripe customer to bill (needs METER_STRIPE_API_KEY on the sidecars)')
    .option('--cloudevents-url <url>', 'a CloudEvents receiver (e.g. OpenMeter ingest): batched CloudEvents 1.0')
    .option('--subject <s>', "the CloudEvents' subject (default: the tag value, else the account name)")
    .option('--markup-pct <p>', 'bill cost × (1 + p ÷ 100); 0 to 10000, up to 4 decimals', '0')
    .option('--json', 'print {"id","account","tag","target","customer"|"url","subject","markup_pct","created_at"}')
    .action(async (opts: LinkOptions) => {
      if ((opts.stripeCustomer === undefined) === (opts.cloudeventsUrl === undefined))
        throw new UsageError('give exactly one of --stripe-customer cus_… and --cloudevents-url URL');
      if (opts.subject !== undefined && opts.cloudeventsUrl === undefined)
        throw new UsageError('--subject goes with --cloudevents-url only');
      if (opts.tag !== undefined) asUsage(() => parseTag(opts.tag!));
      if (opts.stripeCustomer !== undefined) asUsage(() => validateCustomer(opts.stripeCustomer!));
      if (opts.cloudeventsUrl !== undefined) asUsage(() => validateReceiverUrl(opts.cloudeventsUrl!));
      const markupPct = opts.markupPct ?? '0';
      if (parseMarkupPct(markupPct) === undefined)
        throw new UsageError(
          `--markup-pct "${markupPct}" is invalid: expected a percentage from 0 to 10000 with up to 4 decimals (20 bills cost × 1.2)`,
        );
      await run(async (store, config) => {
        // The sidecars send, not this command; but a fleet without the key would keep it pending.
        if (opts.stripeCustomer !== undefined && !config.billing.stripeApiKey) {
          process.stderr.write(
            'note: METER_STRIPE_API_KEY is not set here; the sidecars need it to send to Stripe (until then usage stays pending)\n',
          );
        }
        const link = await store.call('billing.link', {
          account: opts.account,
          tag: opts.tag,
          stripeCustomer: opts.stripeCustomer,
          cloudeventsUrl: opts.cloudeventsUrl,
          subject: opts.subject,
          markupPct,
        });
        if (opts.json) return printJson(linkJson(link));
        out(`linked ${link.id}: ${what(link)} → ${where(link)}, markup ${link.markup_pct}%`);
        out('usage from now on is billed; `meter billing status` shows what was metered and sent');
      });
    });

  billing
    .command('list')
    .description('billing links in force')
    .option('--account <name>', 'only this account')
    .option('--json', 'print {"links":[…]}')
    .action(async (opts: { account?: string; json?: boolean }) => {
      await run(async (store) => {
        const links = await store.call('billing.list', { account: opts.account });
        if (opts.json) return printJson({ links: links.map(linkJson) });
        printTable(
          links.map((l) => ({ ...l, to: l.target === 'stripe' ? l.customer : l.url })),
          ['id', 'account', 'tag', 'target', 'to', 'markup_pct', 'created_at'],
        );
      });
    });

  billing
    .command('unlink <id>')
    .description('stop billing new usage through a link (what is already due is still sent)')
    .option('--json', 'print the link')
    .action(async (id: string, opts: { json?: boolean }) => {
      await run(async (store) => {
        const link = await store.call('billing.unlink', { id });
        if (opts.json) return printJson(linkJson(link));
        out(`unlinked ${link.id}: ${what(link)} → ${where(link)}`);
      });
    });

  billing
    .command('status')
    .description('per link and month: metered, billed (with markup), sent, pending, expired, failed')
    .option('--account <name>', 'only this account')
    .option('--month <YYYY-MM>', 'the UTC month (default: this month)')
    .option('--json', 'print {"links":[…]}')
    .action(async (opts: { account?: string; month?: string; json?: boolean }) => {
      const month = opts.month ?? new Date().toISOString().slice(0, 7);
      if (!/^\d{4}-(0[1-9]|1[0-2])$/.test(month))
        throw new UsageError(`--month "${month}" is invalid: expected YYYY-MM (a UTC month)`);
      await run(async (store) => {
        const links = await store.call('billing.status', { account: opts.account, month });
        if (opts.json) return printJson({ links: links.map(statusJson) });
        if (links.length === 0) return out('(no billing links)');
        for (const l of links) {
          out(`${l.id}  ${what(l)} → ${where(l)}, markup ${l.markup_pct}%  (${l.month}, UTC)`);
          out(`  metered  $${l.metered_usd}`);
          out(`  billed   $${l.billed_usd}`);
          out(`  sent     $${l.sent_usd}`);
          out(`  pending  $${l.pending_usd}`);
          out(`  expired  $${l.expired_usd}`);
          out(`  failed   ${l.failed.length === 0 ? 'none' : `${l.failed.length} item(s)`}`);
          if (l.last_error) out(`  last error: ${l.last_error}`);
        }
      });
    });
}
