import type { UsageEvent } from '../metering/event.js';
import { findCatalogueModel } from '../pricing/catalogue.js';
import type { Pricer } from '../pricing/index.js';
import { getProvider } from '../providers/index.js';
import type { ProviderSlug } from '../providers/types.js';
import { formatUnits, toUnits } from './money.js';
import type { BudgetSnapshot } from './monitor.js';

/** Output tokens assumed when a request sets no max_tokens and the model's window is unknown. */
export const DEFAULT_WORST_OUTPUT_TOKENS = 32_768;
/** Bytes of request body per input token, on the safe side (English runs ~4 bytes a token). */
const BYTES_PER_TOKEN = 3;

export interface HardCapCall {
  id: string;
  accountId: string;
  provider: ProviderSlug;
  path: string;
  /** The request body when it was read whole (bounded); undefined when it was too large. */
  body: Buffer | undefined;
  /** The body's length in bytes (content-length when it was not read). */
  bodyBytes: number;
  time: Date;
}

export type HardCapDecision =
  | { ok: true; reservedUnits: bigint }
  | { ok: false; message: string };

interface AccountLedger {
  /** Worst-case cost of this sidecar's calls in flight, by event id (units of 1e-8 USD). */
  inFlight: Map<string, bigint>;
  /** Actual costs of calls that ended here and may not be in the fleet spend yet. */
  settled: { units: bigint; at: number }[];
}

/**
 * The Pro hard cap (CONTRACT §6): a call is admitted while the month's fleet-wide spend plus this
 * sidecar's not-yet-written costs plus the worst case of its calls in flight is below the budget;
 * its own worst case (max_tokens, else the model's window, and the input size) is then reserved
 * until its usage event says what it really cost. All in memory: no I/O on the hot path.
 */
export class HardCap {
  readonly #ledgers = new Map<string, AccountLedger>();

  constructor(
    private readonly budgets: { budgetOf(accountId: string): BudgetSnapshot | undefined },
    private readonly pricer: Pricer,
    /** How long an ended call's cost is counted locally: until the spend re-read surely has it. */
    private readonly settleMs: number,
  ) {}

  /** true when the account's calls need admission (a budget with a hard cap on a plan that has one). */
  applies(accountId: string): boolean {
    return this.budgets.budgetOf(accountId)?.hardCap === true;
  }

  admit(call: HardCapCall, now = Date.now()): HardCapDecision {
    const budget = this.budgets.budgetOf(call.accountId);
    if (!budget?.hardCap) return { ok: true, reservedUnits: 0n };
    const ledger = this.#ledger(call.accountId);
    const committed = budget.spendUnits + this.#pending(ledger, budget, now);
    if (committed >= budget.budgetUnits) {
      return {
        ok: false,
        message: `the monthly budget of $${budget.budget} for account ${budget.account} is reached ` +
          `($${formatUnits(budget.spendUnits)} spent in ${budget.month}, plus calls in flight); the hard cap ` +
          'refuses calls until the next month or a higher budget (meter budget set)',
      };
    }
    const worst = this.worstCase(call);
    ledger.inFlight.set(call.id, worst);
    return { ok: true, reservedUnits: worst };
  }

  /** A usage event was recorded: its call is no longer in flight, its real cost counts until
   *  the fleet spend includes it. */
  settle(event: Pick<UsageEvent, 'id' | 'accountId' | 'cost'>, now = Date.now()): void {
    const ledger = this.#ledgers.get(event.accountId);
    if (!ledger || !ledger.inFlight.delete(event.id)) return;
    ledger.settled.push({ units: toUnits(event.cost), at: now });
  }

  /** Releases a reservation whose call never produced an event (refused or failed before forwarding). */
  release(accountId: string, id: string): void {
    this.#ledgers.get(accountId)?.inFlight.delete(id);
  }

  /** What this sidecar adds to the account's fleet spend: costs not yet re-read, calls in flight. */
  #pending(ledger: AccountLedger, budget: BudgetSnapshot, now: number): bigint {
    // An event ended before the last re-read minus settleMs was written and re-read by then.
    const seenBy = Math.min(budget.refreshedAt.getTime(), now) - this.settleMs;
    while (ledger.settled.length > 0 && ledger.settled[0]!.at < seenBy) ledger.settled.shift();
    let units = 0n;
    for (const s of ledger.settled) units += s.units;
    for (const r of ledger.inFlight.values()) units += r;
    return units;
  }

  /** The most a call can cost: its input (from the body's size) and its output limit. */
  worstCase(call: HardCapCall): bigint {
    const provider = getProvider(call.provider);
    let parsed: unknown;
    if (call.body) {
      try {
        parsed = JSON.parse(call.body.toString('utf8'));
      } catch {
        parsed = undefined;
      }
    }
    const model = provider?.requestModel({ path: call.path, body: parsed });
    if (!model) return 0n; // unpriceable: metering records it at cost 0 too
    const inputTokens = Math.ceil(call.bodyBytes / BYTES_PER_TOKEN);
    const window = findCatalogueModel(call.provider, model)?.context_window;
    const limit = maxOutputTokens(parsed);
    const outputTokens = limit ?? (window ? Math.max(1, window - inputTokens) : DEFAULT_WORST_OUTPUT_TOKENS);
    const { cost } = this.pricer.cost({
      provider: call.provider,
      model,
      usage: { inputTokens, outputTokens, cachedInputTokens: 0, cacheWriteTokens: 0, cacheWrite1hTokens: 0, reasoningTokens: 0 },
      time: call.time,
    });
    return toUnits(cost);
  }

  #ledger(accountId: string): AccountLedger {
    let l = this.#ledgers.get(accountId);
    if (!l) this.#ledgers.set(accountId, (l = { inFlight: new Map(), settled: [] }));
    return l;
  }
}

/** The request's own output limit, in every provider's spelling. */
export function maxOutputTokens(body: unknown): number | undefined {
  if (!body || typeof body !== 'object') return undefined;
  const b = body as Record<string, unknown>;
  const gen = b.generationConfig ?? b.generation_config ?? (b.config as Record<string, unknown> | undefined);
  const candidates = [
    b.max_completion_tokens, b.max_output_tokens, b.max_tokens, b.maxTokens,
    gen && typeof gen === 'object' ? (gen as Record<string, unknown>).maxOutputTokens ?? (gen as Record<string, unknown>).max_output_tokens : undefined,
  ];
  for (const c of candidates) if (typeof c === 'number' && Number.isFinite(c) && c > 0) return Math.ceil(c);
  return undefined;
}
