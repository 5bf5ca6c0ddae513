import type { Client } from 'undici';
import { MeterError, type ErrorCode } from '../errors.js';
import type { Db } from '../store/types.js';
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

const NO_SQL = 'the daemon admin API runs named commands only, not SQL (stop the daemon to open the store directly)';

/** A store the CLI reaches through a running daemon's admin API: only named commands. */
export interface RemoteStore extends Db {
  call<N extends AdminCommandName>(name: N, args: AdminArgs<N>): Promise<AdminResult<N>>;
}

export function openRemote(address: AdminAddress): RemoteStore {
  // undici's full API is loaded only when a command goes through a daemon.
  let client: Promise<Client> | undefined;
  const connect = async () => {
    const { Client } = await import('undici');
    return address.socket ? new Client('http://localhost', { socketPath: address.socket }) : new Client(address.url!);
  };
  const call = async (name: string, args: unknown) => {
    const res = await (
      await (client ??= connect())
    ).request({
      path: `/admin/${name}`,
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${address.token}` },
      body: JSON.stringify(args ?? {}),
    });
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
  const refuse = () => Promise.reject(new Error(NO_SQL));
  return {
    kind: 'embedded',
    call: (name, args) => call(name, args) as Promise<never>,
    query: refuse,
    exec: refuse,
    transaction: refuse,
    withAdvisoryLock: refuse,
    tryAdvisoryLock: refuse,
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

const isRemote = (db: Db): db is RemoteStore => typeof (db as Partial<RemoteStore>).call === 'function';

/** Runs a named admin command: through the daemon when it holds the store, else directly. */
export function adminCall<N extends AdminCommandName>(
  db: Db,
  name: N,
  args: AdminArgs<N>,
  ctx: AdminContext = {},
): Promise<AdminResult<N>> {
  return isRemote(db) ? db.call(name, args) : runAdminCommand(db, name, args, ctx);
}
