/**
 * Test plumbing for the analytics API: a fixed map of test keys to principals (the real key
 * cache comes from the auth module when the daemon is wired), accounts in the store, and the
 * component served on a loopback port.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll } from 'vitest';
import { createAnalytics } from '../../../src/analytics/index.js';
import type { Authenticator, Principal } from '../../../src/auth/types.js';
import type { Queryable } from '../../../src/store/types.js';

/** TEST ONLY: resolves `Authorization: Bearer <key>` from a fixed map. */
export class FixedKeys implements Authenticator {
  private readonly keys = new Map<string, Principal>();

  add(principal: Principal): string {
    const key = `mk_${principal.keyId}_${randomBytes(16).toString('hex')}`;
    this.keys.set(key, principal);
    return key;
  }

  authenticate(headers: IncomingHttpHeaders): Principal | undefined {
    const m = /^Bearer (\S+)$/.exec(headers.authorization ?? '');
    return m ? this.keys.get(m[1]!) : undefined;
  }
}

export interface TestAccount {
  principal: Principal;
  key: string;
}

/** An account row in the store and a test key for it. */
export async function createAccount(db: Queryable, auth: FixedKeys, plan = 'pro'): Promise<TestAccount> {
  const name = `acct-${randomBytes(4).toString('hex')}`;
  const [row] = await db.query<{ id: string }>('INSERT INTO accounts (name, plan) VALUES ($1, $2) RETURNING id', [
    name,
    plan,
  ]);
  const principal: Principal = { keyId: randomBytes(6).toString('hex'), accountId: row!.id, accountName: name, plan };
  return { principal, key: auth.add(principal) };
}

export interface Reply {
  status: number;
  headers: Headers;
  text: string;
  /** The body with every JSON number kept as its exact text. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- parsed JSON, read freely by the tests
  body: any;
}

export interface TestApi {
  url: string;
  get(path: string, key?: string, init?: RequestInit): Promise<Reply>;
}

/** The analytics component on 127.0.0.1:0 with a pinned clock; closed when the file ends. */
export async function startApi(db: Queryable, auth: Authenticator, now: Date): Promise<TestApi> {
  const component = createAnalytics({ store: db, authenticator: auth, now: () => now });
  const handler = component.routes!['/analytics/']!;
  const server = createServer((req, res) => {
    if (!req.url?.startsWith('/analytics/')) {
      res.writeHead(404).end();
      return;
    }
    Promise.resolve(handler(req, res)).catch((err: Error) => {
      res.writeHead(500).end(err.message);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    async get(path, key, init = {}) {
      const headers = new Headers(init.headers);
      if (key) headers.set('authorization', `Bearer ${key}`);
      const res = await fetch(url + path, { ...init, headers });
      const text = await res.text();
      let body: unknown;
      try {
        body = JSON.parse(quoteNumbers(text));
      } catch {
        body = undefined;
      }
      return { status: res.status, headers: res.headers, text, body };
    },
  };
}

/** Rewrites every JSON number token as a string, so tests compare exact digits. */
export function quoteNumbers(json: string): string {
  let out = '';
  for (let i = 0; i < json.length;) {
    const c = json[i]!;
    if (c === '"') {
      let j = i + 1;
      while (json[j] !== '"') j += json[j] === '\\' ? 2 : 1;
      out += json.slice(i, j + 1);
      i = j + 1;
    } else if (c === '-' || (c >= '0' && c <= '9')) {
      const m = /^-?\d+(\.\d+)?([eE][+-]?\d+)?/.exec(json.slice(i))!;
      out += `"${m[0]}"`;
      i += m[0].length;
    } else {
      out += c;
      i += 1;
    }
  }
  return out;
}
