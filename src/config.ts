import { homedir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { PROVIDER_SLUGS, type ProviderSlug } from './providers/index.js';
import { Secret } from './secret.js';
import { MeterError } from './errors.js';

/** Thrown for a bad setting; the message names the variable and what is allowed. */
export class ConfigError extends MeterError {
  override name = 'ConfigError';
  override readonly exitCode = 2;
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

const int = (min: number, max: number) => {
  const allowed = `an integer from ${min} to ${max}`;
  return z
    .string()
    .trim()
    .regex(/^\d+$/, allowed)
    .transform(Number)
    .pipe(z.number().min(min, allowed).max(max, allowed));
};

const url = (protocols: string[]) =>
  z
    .string()
    .trim()
    .refine(
      (v) => {
        try {
          return protocols.includes(new URL(v).protocol);
        } catch {
          return false;
        }
      },
      `a URL starting with ${protocols.map((p) => `${p}//`).join(' or ')}`,
    );

const SECRET_VARS = new Set([
  'DATABASE_URL',
  'METER_SMTP_URL',
  'METER_OPENAI_ADMIN_KEY',
  'METER_ANTHROPIC_ADMIN_KEY',
  'METER_STRIPE_API_KEY',
]);
/** Secrets that are keys, not URLs: shown as `***` whole. */
const SECRET_KEY_VAR = /_(ADMIN|API)_KEY$/;

const upstreamVar = (slug: ProviderSlug) => `METER_UPSTREAM_${slug.toUpperCase()}`;

/** The environment of CONTRACT §1 (plus the proxy's timeouts). Everything is optional. */
const envSchema = z.object({
  METER_HOST: z.string().trim().min(1, 'a host name or IP address').optional(),
  METER_PORT: int(0, 65535).optional(),
  DATABASE_URL: url(['postgres:', 'postgresql:']).optional(),
  METER_DATA_DIR: z.string().trim().min(1, 'a directory path').optional(),
  METER_PRICES_FILE: z.string().trim().min(1, 'a path to a JSON or YAML file').optional(),
  METER_PRICES_REMOTE: url(['https:', 'http:', 'file:']).optional(),
  METER_FLUSH_INTERVAL_MS: int(10, 60_000).optional(),
  METER_SMTP_URL: url(['smtp:', 'smtps:']).optional(),
  METER_LOG_LEVEL: z.enum(LOG_LEVELS).optional(),
  METER_DEBUG: z.enum(['0', '1', 'true', 'false']).optional(),
  METER_CONNECT_TIMEOUT_MS: int(100, 600_000).optional(),
  METER_IDLE_TIMEOUT_MS: int(1_000, 3_600_000).optional(),
  METER_KEY_REFRESH_MS: int(100, 60_000).optional(),
  METER_FLEET_LEASE_MS: int(3_000, 300_000).optional(),
  METER_FLEET_SYNC_MS: int(20, 10_000).optional(),
  METER_METRICS_PORT: int(0, 65535).optional(),
  METER_METRICS_MODELS: z
    .string()
    .trim()
    .transform((v) =>
      v
        .split(',')
        .map((m) => m.trim())
        .filter((m) => m !== ''),
    )
    .pipe(
      z
        .array(z.string().max(128, 'model names of at most 128 characters'))
        .min(1, 'a comma-separated list of model names')
        .max(100, 'at most 100 model names (each one is a label value on every call metric)'),
    )
    .optional(),
  METER_STORE: z.enum(['postgres', 'timescale']).optional(),
  METER_DB_POOL_MAX: int(1, 1000).optional(),
  METER_DB_IDLE_MS: int(100, 600_000).optional(),
  METER_MAX_HEADER_BYTES: int(1_024, 1_048_576).optional(),
  METER_MAX_HEADERS: int(8, 1_000).optional(),
  METER_HEADERS_TIMEOUT_MS: int(500, 600_000).optional(),
  METER_MAX_CONNECTIONS: int(1, 1_000_000).optional(),
  METER_MAX_BODY_BYTES: int(1_024, 17_179_869_184).optional(),
  METER_METERING_BODY_BYTES: int(1_024, 268_435_456).optional(),
  METER_MAX_DECODED_BYTES: int(1_024, 17_179_869_184).optional(),
  // Reconciliation (docs/reconciliation.md): organisation admin keys, never logged or stored.
  METER_OPENAI_ADMIN_KEY: z.string().trim().min(1, 'an OpenAI admin key').optional(),
  METER_ANTHROPIC_ADMIN_KEY: z.string().trim().min(1, 'an Anthropic Admin API key').optional(),
  METER_RECONCILE_ALERT_PCT: z
    .string()
    .trim()
    .regex(/^\d{1,3}(\.\d{1,2})?$/, 'a percentage from 0.01 to 100 (e.g. 2 or 0.5)')
    .transform(Number)
    .pipe(z.number().min(0.01, 'a percentage from 0.01 to 100').max(100, 'a percentage from 0.01 to 100'))
    .optional(),
  // Customer billing (docs/billing.md): the Stripe secret key is never logged, printed or stored.
  METER_STRIPE_API_KEY: z.string().trim().min(1, 'a Stripe secret key (sk_… or rk_…)').optional(),
  METER_STRIPE_BASE_URL: url(['https:', 'http:'])
    .refine((v) => new URL(v).pathname === '/', 'an origin without a path, e.g. https://api.stripe.com')
    .optional(),
  METER_STRIPE_EVENT_NAME: z
    .string()
    .trim()
    .min(1, 'a Stripe meter event name')
    .max(100, 'at most 100 characters')
    .optional(),
  METER_BILLING_INTERVAL_MS: int(50, 600_000).optional(),
  METER_BILLING_SETTLE_MS: int(0, 3_600_000).optional(),
  METER_BILLING_LEASE_MS: int(1_000, 3_600_000).optional(),
  ...Object.fromEntries(PROVIDER_SLUGS.map((s) => [upstreamVar(s), url(['http:', 'https:']).optional()])),
  // OpenTelemetry export (src/otel): on when either endpoint is set; the SDK reads the other OTEL_* itself.
  OTEL_EXPORTER_OTLP_ENDPOINT: url(['http:', 'https:']).optional(),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: url(['http:', 'https:']).optional(),
  OTEL_SDK_DISABLED: z.enum(['true', 'false']).optional(),
  // The read-only spend page at /ui (docs/ui.md).
  METER_UI: z.enum(['on', 'off']).optional(),
});

export interface Config {
  host: string;
  port: number;
  databaseUrl: string | undefined;
  dataDir: string;
  pricesFile: string | undefined;
  /** Price data fetched at start and every 24 h (genai-prices data format); unset: no fetching. */
  pricesRemote: string | undefined;
  flushIntervalMs: number;
  smtpUrl: string | undefined;
  logLevel: (typeof LOG_LEVELS)[number];
  debug: boolean;
  /** Time to open a connection to a provider before answering 504. */
  connectTimeoutMs: number;
  /** Longest silence between two chunks of a provider's response (reasoning models think long). */
  idleTimeoutMs: number;
  /** How often service keys, accounts and plans are re-read from the store. */
  keyRefreshMs: number;
  /** The fleet's leases (docs/fleet.md): a dead sidecar's slice returns after leaseMs; holders
   *  give unused slices back within syncMs of a sidecar asking. */
  fleet: Readonly<{ leaseMs: number; syncMs: number }>;
  /** Where /metrics gets its own listener (on METER_HOST); unset: the daemon's port, loopback only. */
  metricsPort: number | undefined;
  /** Models that get their own `model` label on the call, token and cost metrics (the rest: `other`). */
  metricsModels: readonly string[];
  /** Forces the mode of a new PostgreSQL database (METER_STORE); undefined: chosen from the database. */
  store: 'postgres' | 'timescale' | undefined;
  /** Connections per sidecar (METER_DB_POOL_MAX). */
  dbPoolMax: number;
  /** How long an unused connection stays open (METER_DB_IDLE_MS). */
  dbIdleMs: number;
  /** Limits of the daemon's port (README "Security"): each is answered with its own status. */
  limits: Readonly<Limits>;
  /** Base address override per provider (origin + base path), from METER_UPSTREAM_<SLUG>. */
  upstreams: Partial<Record<ProviderSlug, string>>;
  /** Organisation admin keys for reconciliation (METER_OPENAI_ADMIN_KEY, METER_ANTHROPIC_ADMIN_KEY). */
  adminKeys: Readonly<{ openai?: Secret; anthropic?: Secret }>;
  /** A month's reconciliation difference (percent) past which the drift alert is sent. */
  reconcileAlertPct: number;
  /** OpenTelemetry export of a span and GenAI metrics per call (an OTLP endpoint is set). */
  otel: boolean;
  /** The spend page at /ui (METER_UI=off: 404). */
  ui: boolean;
  /** Customer billing (docs/billing.md). */
  billing: Readonly<BillingConfig>;
}

export interface BillingConfig {
  /** METER_STRIPE_API_KEY; unset: Stripe links are recorded but not sent by this sidecar. */
  stripeApiKey: Secret | undefined;
  /** Where Stripe's API is (an origin). */
  stripeBaseUrl: string;
  /** The `event_name` of the Stripe meter. */
  stripeEventName: string;
  /** How often what is due is derived and sent. */
  intervalMs: number;
  /** A Stripe minute is derived once it ended this long ago. */
  settleMs: number;
  /** How long a sidecar holds items it is sending (one that dies leaves them due after it). */
  leaseMs: number;
}

export interface Limits {
  /** Request line plus headers, in bytes: 431 beyond. */
  maxHeaderBytes: number;
  /** Header fields in a request: 431 beyond. */
  maxHeaders: number;
  /** Time for a client to send its request headers (slow clients): 408 after it. */
  headersTimeoutMs: number;
  /** Open client connections: 503 (and close) for the next one. */
  maxConnections: number;
  /** A proxied request body: 413 beyond (nothing forwarded when Content-Length says so). */
  maxBodyBytes: number;
  /** A request body is kept for metering (the model, the hard cap's worst case) up to this. */
  meteringBodyBytes: number;
  /** A compressed provider response is decoded for metering up to this, then decoding stops. */
  maxDecodedBytes: number;
}

/** Flags of `meter start` that mirror variables; a flag wins over its variable. */
export type ConfigFlags = Partial<Record<'METER_HOST' | 'METER_PORT' | 'DATABASE_URL' | 'METER_DATA_DIR', string>>;

/** The flag a user types for each mirrored variable, so an error names what was typed. */
const FLAG_NAMES: Record<keyof ConfigFlags, string> = {
  METER_HOST: '--host',
  METER_PORT: '--port',
  DATABASE_URL: '--database-url',
  METER_DATA_DIR: '--data-dir',
};

/** Defaults of the variables that have one, as `meter config` shows them. */
export const DEFAULTS: Readonly<Record<string, string>> = {
  METER_HOST: '127.0.0.1',
  METER_PORT: '8787',
  METER_DATA_DIR: join(homedir(), '.meter'),
  METER_FLUSH_INTERVAL_MS: '200',
  METER_LOG_LEVEL: 'info',
  METER_CONNECT_TIMEOUT_MS: '10000',
  METER_IDLE_TIMEOUT_MS: '300000',
  METER_KEY_REFRESH_MS: '2000',
  METER_FLEET_LEASE_MS: '10000',
  METER_FLEET_SYNC_MS: '250',
  METER_DB_POOL_MAX: '10',
  METER_DB_IDLE_MS: '1000',
  METER_MAX_HEADER_BYTES: '32768',
  METER_MAX_HEADERS: '100',
  METER_HEADERS_TIMEOUT_MS: '10000',
  METER_MAX_CONNECTIONS: '10000',
  METER_MAX_BODY_BYTES: '536870912',
  METER_METERING_BODY_BYTES: '4194304',
  METER_MAX_DECODED_BYTES: '67108864',
  METER_RECONCILE_ALERT_PCT: '2',
  METER_UI: 'on',
  METER_STRIPE_BASE_URL: 'https://api.stripe.com',
  METER_STRIPE_EVENT_NAME: 'llm_cost',
  METER_BILLING_INTERVAL_MS: '5000',
  METER_BILLING_SETTLE_MS: '120000',
  METER_BILLING_LEASE_MS: '60000',
};

/** METER_* names that are not daemon settings but are read elsewhere (an application's own
 *  service key, the test suite's database): no warning for them. */
const NOT_SETTINGS = new Set(['METER_KEY', 'METER_TEST_DATABASE_URL']);

/** Every variable the daemon reads. */
export const VARIABLES: readonly string[] = Object.keys(envSchema.shape);

const flagOf = (name: string, flags: ConfigFlags) =>
  name in FLAG_NAMES && flags[name as keyof ConfigFlags] !== undefined && flags[name as keyof ConfigFlags] !== ''
    ? FLAG_NAMES[name as keyof ConfigFlags]
    : undefined;

/** Query parameters whose names say they carry a credential (`?key=`, `?access_token=`, `?sig=`). */
const CREDENTIAL_PARAM = /key|token|secret|pass|pwd|auth|sig|credential|session/i;

/** A URL with its credentials masked: the password (`postgres://meter:***@db:5432/meter`), a user
 *  name standing alone in an http(s) URL (a token: `https://***@host/`), and every query
 *  parameter named like a credential (`?token=***`). Anything that does not parse is masked whole. */
export function maskUrl(value: string): string {
  try {
    const u = new URL(value);
    if (u.password) u.password = '***';
    else if (u.username && /^https?:$/.test(u.protocol)) u.username = '***';
    for (const name of new Set(u.searchParams.keys())) if (CREDENTIAL_PARAM.test(name)) u.searchParams.set(name, '***');
    return u.toString();
  } catch {
    return '***';
  }
}

const URL_IN_TEXT = /\b[a-z][a-z0-9+.-]*:\/\/[^\s"'<>]+/gi;

/** Text (an error message, a log line) with every URL in it masked as maskUrl does. */
export const maskUrlsIn = (text: string): string => text.replace(URL_IN_TEXT, maskUrl);

const looksLikeUrl = (value: string) => /^[a-z][a-z0-9+.-]*:\/\//i.test(value.trim());

export interface ConfigEntry {
  variable: string;
  /** The effective value (secrets masked), or null when unset. */
  value: string | null;
  source: 'flag' | 'environment' | 'default' | 'unset';
  /** The flag that set it, when source is "flag". */
  flag?: string;
}

/** The effective configuration for `meter config`: every variable, its value and where it came from. */
export function describeConfig(env: NodeJS.ProcessEnv = process.env, flags: ConfigFlags = {}): ConfigEntry[] {
  loadConfig(env, flags); // a bad value is reported as at start
  return VARIABLES.map((variable) => {
    const flag = flagOf(variable, flags);
    const given = flag ? flags[variable as keyof ConfigFlags] : env[variable] || undefined;
    const value = given ?? DEFAULTS[variable] ?? null;
    const shown =
      value === null
        ? value
        : SECRET_KEY_VAR.test(variable)
          ? '***'
          : SECRET_VARS.has(variable) || looksLikeUrl(value)
            ? maskUrl(value)
            : value;
    const source = flag ? 'flag' : given !== undefined ? 'environment' : value !== null ? 'default' : 'unset';
    return flag ? { variable, value: shown, source, flag } : { variable, value: shown, source };
  });
}

/** METER_* variables that are set but mean nothing to meter (a typo is otherwise silent), each
 *  with the closest valid name. */
export function unknownVariables(env: NodeJS.ProcessEnv = process.env): { name: string; suggestion: string }[] {
  return Object.keys(env)
    .filter((name) => name.startsWith('METER_') && !VARIABLES.includes(name) && !NOT_SETTINGS.has(name))
    .sort()
    .map((name) => ({ name, suggestion: closest(name, VARIABLES) }));
}

/** The candidate nearest to `word` when it is close enough to be a typo of it (case aside). */
export function didYouMean(word: string, candidates: readonly string[]): string | undefined {
  if (candidates.length === 0) return undefined;
  const best = closest(
    word.toLowerCase(),
    candidates.map((c) => c.toLowerCase()),
  );
  const index = candidates.findIndex((c) => c.toLowerCase() === best);
  return editDistance(word.toLowerCase(), best) <= Math.max(2, Math.floor(word.length / 4))
    ? candidates[index]
    : undefined;
}

function closest(name: string, candidates: readonly string[]): string {
  let best = candidates[0]!;
  let bestDistance = Infinity;
  for (const c of candidates) {
    const d = editDistance(name, c);
    if (d < bestDistance) [best, bestDistance] = [c, d];
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = row;
  }
  return prev[b.length]!;
}

/** Validates the environment once and returns a frozen Config, or throws ConfigError. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, flags: ConfigFlags = {}): Readonly<Config> {
  const input: Record<string, string> = {};
  for (const key of Object.keys(envSchema.shape)) {
    const value = flags[key as keyof ConfigFlags] ?? env[key];
    if (value !== undefined && value !== '') input[key] = value;
  }
  const parsed = envSchema.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const name = String(issue.path[0]);
    // Name what the user typed (the flag, else the variable); URLs may carry passwords: never echo them.
    const typed = flagOf(name, flags) ?? name;
    const shown = SECRET_VARS.has(name)
      ? typed
      : `${typed}${typed.startsWith('--') ? ' ' : '='}${JSON.stringify(input[name])}`;
    throw new ConfigError(`${shown} is invalid: expected ${describe(issue)}`);
  }
  const e = parsed.data as Record<string, string | number | undefined>;
  const upstreams: Partial<Record<ProviderSlug, string>> = {};
  for (const slug of PROVIDER_SLUGS) {
    const value = e[upstreamVar(slug)];
    if (typeof value === 'string') upstreams[slug] = value.replace(/\/+$/, '');
  }
  const limit = (name: string) => (e[name] as number | undefined) ?? Number(DEFAULTS[name]);
  return Object.freeze({
    host: (e.METER_HOST as string | undefined) ?? DEFAULTS.METER_HOST!,
    port: (e.METER_PORT as number | undefined) ?? Number(DEFAULTS.METER_PORT),
    databaseUrl: e.DATABASE_URL as string | undefined,
    dataDir: (e.METER_DATA_DIR as string | undefined) ?? DEFAULTS.METER_DATA_DIR!,
    pricesFile: e.METER_PRICES_FILE as string | undefined,
    pricesRemote: e.METER_PRICES_REMOTE as string | undefined,
    flushIntervalMs: (e.METER_FLUSH_INTERVAL_MS as number | undefined) ?? 200,
    smtpUrl: e.METER_SMTP_URL as string | undefined,
    logLevel: (e.METER_LOG_LEVEL as Config['logLevel'] | undefined) ?? 'info',
    debug: e.METER_DEBUG === '1' || e.METER_DEBUG === 'true',
    connectTimeoutMs: (e.METER_CONNECT_TIMEOUT_MS as number | undefined) ?? 10_000,
    idleTimeoutMs: (e.METER_IDLE_TIMEOUT_MS as number | undefined) ?? 300_000,
    keyRefreshMs: (e.METER_KEY_REFRESH_MS as number | undefined) ?? 2_000,
    fleet: Object.freeze({
      leaseMs: (e.METER_FLEET_LEASE_MS as number | undefined) ?? 10_000,
      syncMs: (e.METER_FLEET_SYNC_MS as number | undefined) ?? 250,
    }),
    metricsPort: e.METER_METRICS_PORT as number | undefined,
    metricsModels: Object.freeze((parsed.data.METER_METRICS_MODELS as string[] | undefined) ?? []),
    store: e.METER_STORE as Config['store'],
    dbPoolMax: (e.METER_DB_POOL_MAX as number | undefined) ?? 10,
    dbIdleMs: (e.METER_DB_IDLE_MS as number | undefined) ?? 1_000,
    limits: Object.freeze({
      maxHeaderBytes: limit('METER_MAX_HEADER_BYTES'),
      maxHeaders: limit('METER_MAX_HEADERS'),
      headersTimeoutMs: limit('METER_HEADERS_TIMEOUT_MS'),
      maxConnections: limit('METER_MAX_CONNECTIONS'),
      maxBodyBytes: limit('METER_MAX_BODY_BYTES'),
      meteringBodyBytes: limit('METER_METERING_BODY_BYTES'),
      maxDecodedBytes: limit('METER_MAX_DECODED_BYTES'),
    }),
    upstreams: Object.freeze(upstreams),
    adminKeys: Object.freeze({
      openai: e.METER_OPENAI_ADMIN_KEY ? new Secret(e.METER_OPENAI_ADMIN_KEY as string) : undefined,
      anthropic: e.METER_ANTHROPIC_ADMIN_KEY ? new Secret(e.METER_ANTHROPIC_ADMIN_KEY as string) : undefined,
    }),
    reconcileAlertPct: (e.METER_RECONCILE_ALERT_PCT as number | undefined) ?? 2,
    billing: Object.freeze({
      stripeApiKey: e.METER_STRIPE_API_KEY ? new Secret(e.METER_STRIPE_API_KEY as string) : undefined,
      stripeBaseUrl: ((e.METER_STRIPE_BASE_URL as string | undefined) ?? DEFAULTS.METER_STRIPE_BASE_URL!).replace(
        /\/+$/,
        '',
      ),
      stripeEventName: (e.METER_STRIPE_EVENT_NAME as string | undefined) ?? DEFAULTS.METER_STRIPE_EVENT_NAME!,
      intervalMs: limit('METER_BILLING_INTERVAL_MS'),
      settleMs: limit('METER_BILLING_SETTLE_MS'),
      leaseMs: limit('METER_BILLING_LEASE_MS'),
    }),
    otel:
      (e.OTEL_EXPORTER_OTLP_ENDPOINT !== undefined || e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT !== undefined) &&
      e.OTEL_SDK_DISABLED !== 'true',
    ui: e.METER_UI !== 'off',
  });
}

function describe(issue: z.core.$ZodIssue): string {
  if (issue.code === 'invalid_value') return `one of ${issue.values.map(String).join(', ')}`;
  return issue.message;
}
