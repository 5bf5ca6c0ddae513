/**
 * Billing's named admin commands (src/admin/commands.ts spreads them in): what `meter billing`
 * does to the store, so it works through a daemon holding the embedded store too.
 */
import { z } from 'zod';
import type { Db } from '../store/types.js';
import { parseMarkupPct } from './amounts.js';
import { createLink, listLinks, parseTag, unlink, validateCustomer, validateReceiverUrl } from './links.js';
import { billingStatus } from './status.js';

const account = z.string().min(1).max(256);
const entry = <A extends z.ZodType, R>(args: A, run: (db: Db, a: z.output<A>) => Promise<R>) => ({ args, run });

export const billingAdminCommands = {
  'billing.link': entry(
    z
      .strictObject({
        account,
        tag: z.string().max(400).optional(),
        stripeCustomer: z.string().max(100).optional(),
        cloudeventsUrl: z.string().max(2048).optional(),
        subject: z.string().min(1).max(256).optional(),
        markupPct: z
          .string()
          .max(16)
          .refine((v) => parseMarkupPct(v) !== undefined, 'a percentage from 0 to 10000 with up to 4 decimals'),
      })
      .refine(
        (a) => (a.stripeCustomer === undefined) !== (a.cloudeventsUrl === undefined),
        'exactly one of stripeCustomer and cloudeventsUrl',
      )
      .refine(
        (a) => a.subject === undefined || a.cloudeventsUrl !== undefined,
        'subject goes with cloudeventsUrl only',
      ),
    (db, a) =>
      createLink(db, {
        account: a.account,
        tag: a.tag === undefined ? undefined : parseTag(a.tag),
        target: a.stripeCustomer !== undefined ? 'stripe' : 'cloudevents',
        customer: a.stripeCustomer === undefined ? undefined : validateCustomer(a.stripeCustomer),
        url: a.cloudeventsUrl === undefined ? undefined : validateReceiverUrl(a.cloudeventsUrl),
        subject: a.subject,
        markupPct: parseMarkupPct(a.markupPct)!,
      }),
  ),
  'billing.list': entry(z.strictObject({ account: account.optional() }), (db, a) => listLinks(db, a.account)),
  'billing.unlink': entry(z.strictObject({ id: z.string().min(1).max(64) }), (db, a) => unlink(db, a.id)),
  'billing.status': entry(
    z.strictObject({ account: account.optional(), month: z.string().regex(/^\d{4}-\d{2}$/, 'YYYY-MM') }),
    (db, a) => billingStatus(db, a.month, a.account),
  ),
};
