import type { IncomingHttpHeaders } from 'node:http';

/** Who is calling: resolved from a service key (CONTRACT §5). */
export interface Principal {
  keyId: string;
  accountId: string;
  accountName: string;
  plan: string;
}

/** Resolves the service key of a request (`Authorization: Bearer mk_…` or `X-Meter-Key`).
 *  Known keys resolve from memory; a miss may ask the store once. undefined: 401. */
export interface Authenticator {
  authenticate(headers: IncomingHttpHeaders): Principal | undefined | Promise<Principal | undefined>;
}
