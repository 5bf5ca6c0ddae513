/**
 * The METER_PRICES_FILE format (JSON or YAML), validated with zod. Every error names the file,
 * the path inside it and what is allowed there.
 *
 *   providers:
 *     openai:
 *       discount_pct: 10                 # % off every catalogue price of this provider
 *       models:
 *         "ft:gpt-4o-mini-2024-07-18:acme::*":   # exact name, or a prefix ending in *
 *           input_mtok: "0.30"            # USD per million tokens: decimal string or number
 *           cache_read_mtok: "0.15"
 *           output_mtok: "1.20"
 *         gpt-4o:
 *           discount_pct: 20              # catalogue price of this model, 20% off
 *     gemini:
 *       models:
 *         gemini-2.5-flash:
 *           web_searches_kcount: 35       # no token price: added to the catalogue's prices
 *     together:
 *       models:
 *         my-llama:
 *           same_as: meta-llama/Llama-3.3-70B-Instruct-Turbo   # catalogue price of another model
 *     anthropic:
 *       models:
 *         my-claude:
 *           input_mtok: 3
 *           output_mtok: 15
 *           tiers:                        # above N total input tokens the whole request is re-priced
 *             - { above_input_tokens: 200000, input_mtok: 6, output_mtok: 22.5 }
 *
 * Precedence: an exact name; an exact name that is a catalogue model id also covers the names
 * the catalogue maps to it (gpt-4o covers gpt-4o-2024-08-06); the longest `prefix*`; then the
 * catalogue with the provider's discount_pct. A model's discount_pct replaces the provider's.
 * Numbers go through JSON/YAML floats: write prices with more than 15 significant digits as strings.
 */
import { z } from 'zod';
import { parseDecimal } from './decimal.js';
import { PROVIDER_SLUGS } from '../providers/index.js';

const PRICE_HELP = 'expected a non-negative decimal in USD per million tokens (a string like "0.15" or a number)';
const PCT_HELP = 'expected a percentage from 0 to 100 (a string like "12.5" or a number)';

export const PRICE_FIELDS = [
  'input_mtok',
  'cache_read_mtok',
  'cache_write_mtok',
  'cache_write_1h_mtok',
  'output_mtok',
  'input_audio_mtok',
  'cache_audio_read_mtok',
  'input_image_mtok',
  'cache_image_read_mtok',
  'input_video_mtok',
  'output_audio_mtok',
  'output_image_mtok',
  'output_video_mtok',
  'web_searches_kcount',
  'social_searches_kcount',
  'storage_searches_kcount',
  'rerank_searches_kcount',
  'requests_kcount',
] as const;
export type PriceField = (typeof PRICE_FIELDS)[number];

function describe(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (v === null) return 'null';
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  return Array.isArray(v) ? 'a list' : 'a mapping';
}

/** A strict mapping whose unknown keys are reported with the list of allowed ones. */
function strict<T extends z.ZodRawShape>(shape: T, what: string) {
  const allowed = Object.keys(shape).join(', ');
  return z.strictObject(shape, {
    error: (iss) => {
      if (iss.code === 'unrecognized_keys') {
        const keys = iss.keys.map((k) => JSON.stringify(k)).join(', ');
        return `unknown key${iss.keys.length > 1 ? 's' : ''} ${keys} in ${what}; allowed: ${allowed}`;
      }
      if (iss.code === 'invalid_type')
        return `expected ${what} (a mapping with keys ${allowed}), got ${describe(iss.input)}`;
      return undefined;
    },
  });
}

const price = z
  .union([z.string(), z.number()], { error: (iss) => `${PRICE_HELP}, got ${describe(iss.input)}` })
  .refine((v) => parseDecimal(v) !== null, { error: (iss) => `${PRICE_HELP}, got ${describe(iss.input)}` });

const pct = z.union([z.string(), z.number()], { error: (iss) => `${PCT_HELP}, got ${describe(iss.input)}` }).refine(
  (v) => {
    const d = parseDecimal(v);
    return d !== null && d.coef <= 100n * 10n ** BigInt(d.scale);
  },
  { error: (iss) => `${PCT_HELP}, got ${describe(iss.input)}` },
);

const priceShape = Object.fromEntries(PRICE_FIELDS.map((f) => [f, price.optional()])) as Record<
  PriceField,
  z.ZodOptional<typeof price>
>;

const tier = strict(
  {
    above_input_tokens: z
      .int({
        error: (iss) =>
          `expected a whole number of input tokens (the tier applies above it), got ${describe(iss.input)}`,
      })
      .min(0, { error: 'expected a whole number of input tokens >= 0' }),
    ...priceShape,
  },
  'a tier',
);

const model = strict(
  {
    ...priceShape,
    tiers: z.array(tier, { error: (iss) => `expected a list of tiers, got ${describe(iss.input)}` }).optional(),
    discount_pct: pct.optional(),
    same_as: z
      .string({ error: (iss) => `expected the name of a catalogue model, got ${describe(iss.input)}` })
      .trim()
      .min(1, { error: 'expected the name of a catalogue model' })
      .optional(),
  },
  'a model entry',
).superRefine((m, ctx) => {
  const given = PRICE_FIELDS.filter((f) => m[f] !== undefined);
  if (m.same_as !== undefined && (given.length || m.tiers)) {
    ctx.addIssue({ code: 'custom', message: 'give either same_as or prices (input_mtok, output_mtok, …), not both' });
  }
  if (m.same_as === undefined && !given.length && m.discount_pct === undefined) {
    ctx.addIssue({
      code: 'custom',
      message: `a model entry needs prices (${PRICE_FIELDS.join(', ')}), same_as, or discount_pct`,
    });
  }
  if (m.tiers && !given.length) {
    ctx.addIssue({ code: 'custom', path: ['tiers'], message: 'tiers need base prices on the model entry' });
  }
  let prev = -1;
  m.tiers?.forEach((t, i) => {
    if (t.above_input_tokens <= prev) {
      ctx.addIssue({
        code: 'custom',
        path: ['tiers', i, 'above_input_tokens'],
        message: 'tiers must be in increasing order of above_input_tokens',
      });
    }
    prev = t.above_input_tokens;
    for (const f of PRICE_FIELDS) {
      if (t[f] !== undefined && m[f] === undefined) {
        ctx.addIssue({
          code: 'custom',
          path: ['tiers', i, f],
          message: `a tier price for ${f} needs a base ${f} on the model entry`,
        });
      }
    }
    if (!PRICE_FIELDS.some((f) => t[f] !== undefined)) {
      ctx.addIssue({
        code: 'custom',
        path: ['tiers', i],
        message: `a tier needs at least one price (${PRICE_FIELDS.join(', ')})`,
      });
    }
  });
});

const MODEL_KEY_RE = /^[^*]+\*?$/;

const provider = strict(
  {
    discount_pct: pct.optional(),
    models: z
      .record(z.string(), model, {
        error: (iss) => `expected a mapping of model names to entries, got ${describe(iss.input)}`,
      })
      .superRefine((models, ctx) => {
        const seen = new Map<string, string>();
        for (const key of Object.keys(models)) {
          if (!MODEL_KEY_RE.test(key.trim())) {
            ctx.addIssue({
              code: 'custom',
              path: [key],
              message: 'a model name may use * only once, as its last character (a prefix match)',
            });
          }
          const norm = key.trim().toLowerCase();
          const other = seen.get(norm);
          if (other !== undefined) {
            ctx.addIssue({
              code: 'custom',
              path: [key],
              message: `same model as ${JSON.stringify(other)} (names are case-insensitive)`,
            });
          }
          seen.set(norm, key);
        }
      })
      .optional(),
  },
  'a provider entry',
);

const providers = strict(
  Object.fromEntries(PROVIDER_SLUGS.map((s) => [s, provider.optional()])) as Record<
    (typeof PROVIDER_SLUGS)[number],
    z.ZodOptional<typeof provider>
  >,
  'providers',
);

export const pricesFileSchema = strict(
  {
    version: z.literal(1, { error: 'expected version: 1 (or no version)' }).optional(),
    providers,
  },
  'the top level',
);

export type PricesFile = z.infer<typeof pricesFileSchema>;
export type ModelOverrideInput = z.infer<typeof model>;
export type ProviderOverrideInput = z.infer<typeof provider>;

/** "providers.openai.models["ft:gpt-4o:acme"].tiers[0].input_mtok" */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const seg of path) {
    if (typeof seg === 'number') out += `[${seg}]`;
    else if (typeof seg === 'string' && /^[A-Za-z_][A-Za-z0-9_-]*$/.test(seg)) out += out ? `.${seg}` : seg;
    else out += `[${JSON.stringify(String(seg))}]`;
  }
  return out || '(top level)';
}
