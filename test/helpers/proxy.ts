import pino from 'pino';
import { createAccount } from '../../src/auth/accounts.js';
import { createKey } from '../../src/auth/keys.js';
import { loadConfig, type Config } from '../../src/config.js';
import type { Metering } from '../../src/metering/types.js';
import type { ProviderSlug } from '../../src/providers/types.js';
import { proxyComponent, type ProxyOptions } from '../../src/proxy/component.js';
import { startDaemon, type Daemon } from '../../src/server/daemon.js';
import { atFileEnd, tempDirAtFileEnd } from './cleanup.js';
import { databaseForFile } from './file-stores.js';
import { postgresUrl } from './stores.js';

export interface ProxyDaemon {
  daemon: Daemon;
  url: string;
  config: Readonly<Config>;
  /** A working service key of account `acct` and its id. */
  key: string;
  keyId: string;
  account: string;
}

let accounts = 0;

/** The daemon with the proxy component, in this process, on a fresh store (PostgreSQL when
 *  one answers, else embedded), upstreams pointed at fakes, and one account with one key. */
export async function startProxyDaemon(
  opts: {
    upstreams?: Partial<Record<ProviderSlug, string>>;
    env?: Record<string, string>;
    metering?: Metering;
    admission?: ProxyOptions['admission'];
    databaseUrl?: string;
  } = {},
): Promise<ProxyDaemon> {
  const env: Record<string, string> = {
    METER_PORT: '0',
    METER_HOST: '127.0.0.1',
    METER_DATA_DIR: tempDirAtFileEnd(),
    ...opts.env,
  };
  // PostgreSQL starts faster than the embedded store; METER_TEST_PROXY_STORE=embedded forces the latter.
  const usePostgres = postgresUrl && process.env.METER_TEST_PROXY_STORE !== 'embedded';
  const databaseUrl = opts.databaseUrl ?? (usePostgres ? await databaseForFile() : undefined);
  if (databaseUrl) env.DATABASE_URL = databaseUrl;
  for (const [slug, url] of Object.entries(opts.upstreams ?? {})) env[`METER_UPSTREAM_${slug.toUpperCase()}`] = url;
  const config = loadConfig(env);
  const daemon = await startDaemon(config, pino({ level: 'silent' }), async (ctx, start) =>
    start(await proxyComponent(ctx, { metering: opts.metering, admission: opts.admission })),
  );
  atFileEnd(() => daemon.close());
  const account = `acct${++accounts}-${process.pid}`;
  await createAccount(daemon.store, account, 'pro');
  const created = await createKey(daemon.store, account, 'test');
  return { daemon, url: daemon.url, config, key: created.key, keyId: created.id, account };
}
