import { homedir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { PROVIDER_SLUGS, type ProviderSlug } from './providers/types.js';

/** Thrown for a bad setting; the message names the variable and what is allowed. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

const int = (min: number, max: number) => {
  const allowed = `an integer from ${min} to ${max}`;
  return z.string().trim().regex(/^\d+$/, allowed).transform(Number).pipe(z.number().min(min, allowed).max(max, allowed));
};

const url = (protocols: string[]) =>
  z.string().trim().refine((v) => {
    try {
      return protocols.includes(new URL(v).protocol);
    } catch {
      return false;
    }
  }, `a URL starting with ${protocols.map((p) => `${p}//`).join(' or ')}`);

const SECRET_VARS = new Set(['DATABASE_URL', 'METER_SMTP_URL']);

const upstreamVar = (slug: ProviderSlug) => `METER_UPSTREAM_${slug.toUpperCase()}`;

/** The environment of CONTRACT §1 (plus the proxy's timeouts). Everything is optional. */
const envSchema = z.object({
  METER_HOST: z.string().trim().min(1, 'a host name or IP address').optional(),
  METER_PORT: int(0, 65535).optional(),
  DATABASE_URL: url(['postgres:', 'postgresql:']).optional(),
  METER_DATA_DIR: z.string().trim().min(1, 'a directory path').optional(),
  METER_PRICES_FILE: z.string().trim().min(1, 'a path to a JSON or YAML file').optional(),
  METER_FLUSH_INTERVAL_MS: int(10, 60_000).optional(),
  METER_SMTP_URL: url(['smtp:', 'smtps:']).optional(),
  METER_LOG_LEVEL: z.enum(LOG_LEVELS).optional(),
  METER_DEBUG: z.enum(['0', '1', 'true', 'false']).optional(),
  METER_CONNECT_TIMEOUT_MS: int(100, 600_000).optional(),
  METER_IDLE_TIMEOUT_MS: int(1_000, 3_600_000).optional(),
  METER_KEY_REFRESH_MS: int(100, 60_000).optional(),
  ...Object.fromEntries(PROVIDER_SLUGS.map((s) => [upstreamVar(s), url(['http:', 'https:']).optional()])),
});

export interface Config {
  host: string;
  port: number;
  databaseUrl: string | undefined;
  dataDir: string;
  pricesFile: string | undefined;
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
  /** Base address override per provider (origin + base path), from METER_UPSTREAM_<SLUG>. */
  upstreams: Partial<Record<ProviderSlug, string>>;
}

/** Flags of `meter start` that mirror variables; a flag wins over its variable. */
export type ConfigFlags = Partial<Record<'METER_HOST' | 'METER_PORT' | 'DATABASE_URL' | 'METER_DATA_DIR', string>>;

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
    // URLs may carry passwords: name the variable, never echo its value.
    const shown = SECRET_VARS.has(name) ? name : `${name}=${JSON.stringify(input[name])}`;
    throw new ConfigError(`${shown} is invalid: expected ${describe(issue)}`);
  }
  const e = parsed.data as Record<string, string | number | undefined>;
  const upstreams: Partial<Record<ProviderSlug, string>> = {};
  for (const slug of PROVIDER_SLUGS) {
    const value = e[upstreamVar(slug)];
    if (typeof value === 'string') upstreams[slug] = value.replace(/\/+$/, '');
  }
  return Object.freeze({
    host: (e.METER_HOST as string | undefined) ?? '127.0.0.1',
    port: (e.METER_PORT as number | undefined) ?? 8787,
    databaseUrl: e.DATABASE_URL as string | undefined,
    dataDir: (e.METER_DATA_DIR as string | undefined) ?? join(homedir(), '.meter'),
    pricesFile: e.METER_PRICES_FILE as string | undefined,
    flushIntervalMs: (e.METER_FLUSH_INTERVAL_MS as number | undefined) ?? 200,
    smtpUrl: e.METER_SMTP_URL as string | undefined,
    logLevel: (e.METER_LOG_LEVEL as Config['logLevel'] | undefined) ?? 'info',
    debug: e.METER_DEBUG === '1' || e.METER_DEBUG === 'true',
    connectTimeoutMs: (e.METER_CONNECT_TIMEOUT_MS as number | undefined) ?? 10_000,
    idleTimeoutMs: (e.METER_IDLE_TIMEOUT_MS as number | undefined) ?? 300_000,
    keyRefreshMs: (e.METER_KEY_REFRESH_MS as number | undefined) ?? 2_000,
    upstreams: Object.freeze(upstreams),
  });
}

function describe(issue: z.core.$ZodIssue): string {
  if (issue.code === 'invalid_value') return `one of ${issue.values.map(String).join(', ')}`;
  return issue.message;
}
