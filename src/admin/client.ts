import type { Client } from 'undici';
import { MeterError, type ErrorCode } from '../errors.js';
import type { Db, StoreKind } from '../store/types.js';
import {
  runAdminCommand,
  type AdminArgs,
  type AdminCommandName,
  type AdminContext,
  type AdminResult,
} from './commands.js';
import type { AdminAddress } from '../store/lockfile.js';

/** A user error the daemon answered with (MeterError there): its code and status come along. */
class RemoteUserError extends MeterError {
  override name = 'RemoteUserError';
  constructor(
    message: string,
    override readonly code: ErrorCode,
    override readonly status: number,
  ) {
    super(message);
  }
}

/**
 * The CLI's one way to the store: named admin commands (never SQL). `localStore` runs them on a
 * store this process opened; `openRemote` sends them to the daemon that holds the embedded
 * store. `ctx`: settings of this process a command needs (SMTP for `alerts test`); the daemon
 * uses its own.
 */
export interface CliStore {
  readonly kind: StoreKind;
  call<N extends AdminCommandName>(name: N, args: AdminArgs<N>, ctx?: AdminContext): Promise<AdminResult<N>>;
  /** The store itself, when this process holds it: a command that streams rows (`export`) reads it directly. */
  readonly db?: Db;
  /** Through a daemon: a command that answers a stream of text (`export`), once the daemon said 200. */
  stream?(name: 'export', args: unknown): Promise<AsyncIterable<Buffer>>;
  close(): Promise<void>;
}

/** Runs named admin commands only: what a feature's job and the CLI share (`localStore(db)` in a daemon). */
export type AdminPort = Pick<CliStore, 'call'>;

/** A store this process holds (PostgreSQL, or the embedded store no daemon holds). */
export function localStore(db: Db): CliStore {
  return {
    kind: db.kind,
    db,
    call: (name, args, ctx = {}) => runAdminCommand(db, name, args, ctx),
    close: () => db.close(),
  };
}

/** The embedded store through the daemon that holds it. */
export interface RemoteStore extends CliStore {
  /** true when the daemon answers. */
  ping(): Promise<boolean>;
}

export function openRemote(address: AdminAddress): RemoteStore {
  // undici's full API is loaded only when a command goes through a daemon.
  let client: Promise<Client> | undefined;
  const connect = async () => {
    const { Client } = await import('undici');
    return address.socket ? new Client('http://localhost', { socketPath: address.socket }) : new Client(address.url!);
  };
  const send = async (name: string, args: unknown) =>
    (await (client ??= connect())).request({
      path: `/admin/${name}`,
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${address.token}` },
      body: JSON.stringify(args ?? {}),
    });
  const call = async (name: string, args: unknown) => {
    const res = await send(name, args);
    const json = (await res.body.json()) as { result?: unknown; error?: { code: ErrorCode; message: string } };
    if (res.statusCode !== 200) {
      const message = json.error?.message ?? `daemon admin API answered ${res.statusCode}`;
      // The daemon's user error, as the command would have thrown it here.
      throw res.statusCode < 500 && json.error
        ? new RemoteUserError(message, json.error.code, res.statusCode)
        : new Error(message);
    }
    return json.result;
  };
  return {
    kind: 'embedded',
    call: (name, args) => call(name, args) as Promise<never>,
    async stream(name, args) {
      const res = await send(name, args);
      if (res.statusCode === 200) return res.body;
      const json = (await res.body.json().catch(() => ({}))) as { error?: { message: string } };
      throw new Error(json.error?.message ?? `daemon admin API answered ${res.statusCode}`);
    },
    async ping() {
      try {
        await call('schema.versions', {});
        return true;
      } catch {
        return false;
      }
    },
    close: async () => {
      if (client) await (await client).close();
    },
  };
}
