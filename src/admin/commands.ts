import { z } from 'zod';
import { CHANNEL_KINDS } from '../alerts/alert.js';
import { addChannel, listChannels, removeChannel, validateSecret, validateTarget } from '../alerts/channels-admin.js';
import { sendTestAlerts } from '../budget/test-alert.js';
import { createAccount, deleteAccount, listAccounts, setAccountPlan } from '../auth/accounts.js';
import { createKey, listKeys, revokeKey, rotateKey } from '../auth/keys.js';
import { clearBudget, setBudget, showBudget } from '../budget/admin.js';
import { createBudget, deleteBudget, listBudgets, showBudgetById, updateBudget } from '../budget/budgets-admin.js';
import { ACTIONS, SCOPE_KINDS, WINDOWS } from '../budget/scope.js';
import { validTimeZone, type WindowKind } from '../calendar.js';
import { parseBudgetUsd } from '../money.js';
import { setLimits, showLimits } from '../fleet/admin.js';
import { loadPlans, updatePlan, PLAN_ANALYTICS } from '../plans/plans.js';
import { reconcileAdminCommands } from '../reconcile/admin.js';
import { billingAdminCommands } from '../billing/admin.js';
import type { Db } from '../store/types.js';
import { checkParams, TOP_STATEMENTS, type NamedStatement } from '../top/statements.js';
import { MeterError } from '../errors.js';

/**
 * Everything the CLI may do to a store, by name, with validated arguments: the only operations
 * the daemon's admin socket runs (never SQL from the caller). The CLI runs the same entries
 * directly when it opens the store itself, so both ways give the same answers.
 * Adding an operation (e.g. a read for `meter top`) is one entry here.
 */
export interface AdminContext {
  /** METER_SMTP_URL of the process that runs the command (alerts test). */
  smtpUrl?: string;
  /** METER_PRICES_FILE of that process (pricing reprice). */
  pricesFile?: string;
}

interface AdminCommand<A extends z.ZodType, R> {
  args: A;
  run(db: Db, args: z.output<A>, ctx: AdminContext): Promise<R>;
}

const command = <A extends z.ZodType, R>(args: A, run: AdminCommand<A, R>['run']): AdminCommand<A, R> => ({
  args,
  run,
});

const name = z.string().min(1).max(256);
const none = z.strictObject({});
const account = z.strictObject({ account: name });
const count = z.number().int().min(1).max(2_000_000_000);
const usd = z
  .string()
  .refine((v) => parseBudgetUsd(v) !== undefined, 'a USD amount greater than 0 with up to 8 decimals');
const budgetId = z.string().min(1).max(64);
/** A budget's definition as `meter budgets create|update` parsed it (each field optional). */
const budgetSpec = {
  amount: usd.transform((v) => parseBudgetUsd(v)!).optional(),
  scope: z
    .strictObject({
      kind: z.enum(SCOPE_KINDS),
      key: z.string().max(64).nullable(),
      value: z.string().min(1).max(256).nullable(),
    })
    .optional(),
  window: z.enum(WINDOWS as [WindowKind, ...WindowKind[]]).optional(),
  timezone: z
    .string()
    .max(64)
    .refine((v) => validTimeZone(v) !== undefined, 'an IANA time zone')
    .transform((v) => validTimeZone(v)!)
    .optional(),
  levels: z.array(z.number().int().min(1).max(1000)).min(1).max(10).optional(),
  action: z.enum(ACTIONS).optional(),
  strict: z.boolean().optional(),
};

/** Fixed statements (each with the kinds of its parameters), one command each: `{params: […]}`. */
function statementCommands<S extends Record<string, NamedStatement>>(statements: S) {
  const params = z.strictObject({ params: z.array(z.unknown()).max(16) });
  const out = {} as { [K in keyof S]: AdminCommand<typeof params, Record<string, unknown>[]> };
  for (const [name, statement] of Object.entries(statements) as [keyof S & string, NamedStatement][]) {
    out[name] = command(params, async (db, a) => {
      const problem = checkParams(statement, a.params);
      if (problem) throw new AdminArgsError(`${name}: ${problem}`);
      return db.query(statement.sql, a.params);
    });
  }
  return out;
}

export const adminCommands = {
  // meter top's reads (src/top/statements.ts).
  ...statementCommands(TOP_STATEMENTS),
  // meter reconcile's reads and writes (src/reconcile/admin.ts).
  ...reconcileAdminCommands,
  // meter billing's links and status (src/billing/admin.ts).
  ...billingAdminCommands,

  'schema.versions': command(none, (db) =>
    db.query<{ version: number; name: string }>('SELECT version, name FROM schema_migrations ORDER BY version'),
  ),

  'plans.list': command(none, async (db) => [...(await loadPlans(db)).values()]),
  'plans.set': command(
    z.strictObject({
      plan: name,
      monthlyCalls: z.union([count, z.literal('unlimited')]).optional(),
      maxKeys: count.optional(),
      retentionDays: count.optional(),
      rollupMonths: count.optional(),
      rateLimit: count.optional(),
      tokensPerMinute: z.union([count, z.literal('unlimited')]).optional(),
      accountCallsPerMinute: z.union([count, z.literal('unlimited')]).optional(),
      accountTokensPerMinute: z.union([count, z.literal('unlimited')]).optional(),
      analytics: z.array(z.enum(PLAN_ANALYTICS)).optional(),
      hardCap: z.boolean().optional(),
    }),
    (db, { plan, ...edits }) => updatePlan(db, plan, edits),
  ),

  'limits.set': command(
    z.strictObject({
      account: name,
      key: z.string().min(1).max(64).optional(),
      callsPerMinute: z.union([count, z.literal('plan')]).optional(),
      tokensPerMinute: z.union([count, z.literal('plan')]).optional(),
    }),
    (db, a) =>
      setLimits(db, a.account, a.key, { callsPerMinute: a.callsPerMinute, tokensPerMinute: a.tokensPerMinute }),
  ),
  'limits.show': command(account, (db, a) => showLimits(db, a.account)),

  'accounts.delete': command(z.strictObject({ name, force: z.boolean() }), (db, a) =>
    deleteAccount(db, a.name, a.force),
  ),
  'accounts.create': command(z.strictObject({ name, plan: name.optional() }), (db, a) =>
    createAccount(db, a.name, a.plan),
  ),
  'accounts.list': command(none, (db) => listAccounts(db)),
  'accounts.setPlan': command(z.strictObject({ name, plan: name }), (db, a) => setAccountPlan(db, a.name, a.plan)),

  'keys.create': command(z.strictObject({ account: name, name: z.string().max(256).optional() }), (db, a) =>
    createKey(db, a.account, a.name),
  ),
  'keys.list': command(z.strictObject({ account: name.optional() }), (db, a) => listKeys(db, a.account)),
  'keys.revoke': command(z.strictObject({ id: z.string().min(1).max(512) }), (db, a) => revokeKey(db, a.id)),
  'keys.rotate': command(
    z.strictObject({
      id: z.string().min(1).max(512),
      graceSeconds: z
        .number()
        .int()
        .min(0)
        .max(10 * 365 * 86_400),
    }),
    (db, a) => rotateKey(db, a.id, a.graceSeconds),
  ),

  'budget.set': command(
    z.strictObject({
      account: name,
      monthlyUsd: z
        .string()
        .refine((v) => parseBudgetUsd(v) !== undefined, 'a USD amount greater than 0 with up to 8 decimals'),
      hardCap: z.boolean().optional(),
    }),
    async (db, a) => {
      const result = await setBudget(db, a.account, parseBudgetUsd(a.monthlyUsd)!, a.hardCap);
      return { ...result, view: await showBudget(db, a.account) };
    },
  ),
  'budget.show': command(account, (db, a) => showBudget(db, a.account)),
  'budget.clear': command(account, (db, a) => clearBudget(db, a.account)),

  'budgets.create': command(
    z.strictObject({ account: name, ...budgetSpec, amount: budgetSpec.amount.unwrap() }),
    (db, a) => {
      const { account: acct, ...spec } = a;
      return createBudget(db, acct, spec);
    },
  ),
  'budgets.list': command(z.strictObject({ account: name.optional() }), (db, a) => listBudgets(db, a.account)),
  'budgets.show': command(z.strictObject({ id: budgetId }), (db, a) => showBudgetById(db, a.id)),
  'budgets.update': command(z.strictObject({ id: budgetId, ...budgetSpec }), (db, { id, ...changes }) =>
    updateBudget(db, id, changes),
  ),
  'budgets.delete': command(z.strictObject({ id: budgetId }), (db, a) => deleteBudget(db, a.id)),

  'alerts.add': command(
    z.strictObject({
      account: name,
      kind: z.enum(CHANNEL_KINDS),
      target: z.string().min(1).max(2048),
      secret: z.string().max(1024).optional(),
    }),
    (db, a) =>
      addChannel(
        db,
        a.account,
        a.kind,
        validateTarget(a.kind, a.target),
        a.secret === undefined ? undefined : validateSecret(a.secret),
      ),
  ),
  'alerts.list': command(z.strictObject({ account: name.optional() }), (db, a) => listChannels(db, a.account)),
  'alerts.remove': command(z.strictObject({ id: z.string().min(1).max(64) }), (db, a) => removeChannel(db, a.id)),
  'pricing.reprice': command(
    z.strictObject({
      since: z
        .string()
        .max(64)
        .refine((v) => !Number.isNaN(Date.parse(v)), 'an ISO date or timestamp'),
    }),
    async (db, a, ctx) => {
      // Loaded here: the price catalogue is not needed by the other commands.
      const [{ Pricer }, { repriceUnpriced }] = await Promise.all([
        import('../pricing/index.js'),
        import('../pricing/reprice.js'),
      ]);
      return repriceUnpriced(db, new Pricer({ pricesFile: ctx.pricesFile }), new Date(a.since));
    },
  ),
  'alerts.test': command(account, async (db, a, ctx) => {
    const results = await sendTestAlerts(db, a.account, { timeoutMs: 10_000, smtpUrl: ctx.smtpUrl });
    return results.map((r) => ({
      id: r.channel.id,
      kind: r.channel.kind,
      ok: r.result.ok,
      detail: r.detail,
      duration_ms: Math.round(r.result.durationMs),
    }));
  }),
};

export type AdminCommandName = keyof typeof adminCommands;
type Entry<N extends AdminCommandName> = (typeof adminCommands)[N];
export type AdminArgs<N extends AdminCommandName> = z.input<Entry<N>['args']>;
export type AdminResult<N extends AdminCommandName> = Entry<N> extends AdminCommand<z.ZodType, infer R> ? R : never;

/** Thrown for arguments that fail their schema: names the argument and what is allowed. */
export class AdminArgsError extends MeterError {
  override name = 'AdminArgsError';
}

export function isAdminCommand(name: string): name is AdminCommandName {
  return Object.hasOwn(adminCommands, name);
}

/** Validates the arguments and runs one command on a store this process holds. The result is
 *  what a caller through the daemon would get (JSON: dates as ISO strings). */
export async function runAdminCommand<N extends AdminCommandName>(
  db: Db,
  name: N,
  args: unknown,
  ctx: AdminContext,
): Promise<AdminResult<N>> {
  const entry = adminCommands[name] as unknown as AdminCommand<z.ZodType, AdminResult<N>>;
  const parsed = entry.args.safeParse(args ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const at = issue.path.length ? `"${issue.path.join('.')}"` : 'arguments';
    throw new AdminArgsError(`${name}: ${at} is invalid: ${issue.message}`);
  }
  const result = await entry.run(db, parsed.data, ctx);
  return result === undefined ? result : JSON.parse(JSON.stringify(result));
}
