import { hash, randomBytes, timingSafeEqual } from 'node:crypto';

/** A service key: `mk_<12 hex public id>_<secret>` (CONTRACT §5). */
export interface ServiceKeyParts {
  id: string;
  secret: string;
}

const PREFIX = 'mk_';
const ID_LENGTH = 12;
/** 32 random bytes in base64url: 43 characters, 256 bits. */
const SECRET_BYTES = 32;
const MIN_SECRET = 32;
/** Longer tokens are refused before hashing: nobody gets to make us hash megabytes. */
const MAX_SECRET = 128;

export function generateServiceKey(): { id: string; secret: string; key: string } {
  const id = randomBytes(ID_LENGTH / 2).toString('hex');
  const secret = randomBytes(SECRET_BYTES).toString('base64url');
  return { id, secret, key: `${PREFIX}${id}_${secret}` };
}

function isLowerHex(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66);
}

function isBase64Url(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c === 0x2d || c === 0x5f;
}

/** Splits a token into id and secret, or undefined when it is not a well-formed key.
 *  Character checks instead of a regex: this runs on every proxied call. */
export function parseServiceKey(token: string): ServiceKeyParts | undefined {
  const secretStart = PREFIX.length + ID_LENGTH + 1;
  const secretLength = token.length - secretStart;
  if (secretLength < MIN_SECRET || secretLength > MAX_SECRET) return undefined;
  if (!token.startsWith(PREFIX) || token.charCodeAt(secretStart - 1) !== 0x5f /* _ */) return undefined;
  for (let i = PREFIX.length; i < secretStart - 1; i++) if (!isLowerHex(token.charCodeAt(i))) return undefined;
  for (let i = secretStart; i < token.length; i++) if (!isBase64Url(token.charCodeAt(i))) return undefined;
  return { id: token.slice(PREFIX.length, secretStart - 1), secret: token.slice(secretStart) };
}

/** SHA-256 of the secret. The secret has 256 bits of entropy, so a fast hash is the right
 *  one: there is nothing to brute-force, and a slow KDF would cost every call. */
export function hashSecret(secret: string): Buffer {
  return hash('sha256', secret, 'buffer'); // one-shot: half the cost of createHash().update().digest()
}

export function secretMatches(secret: string, expectedHash: Buffer): boolean {
  const actual = hashSecret(secret);
  return actual.length === expectedHash.length && timingSafeEqual(actual, expectedHash);
}

/** The service key of a request: `X-Meter-Key`, else `Authorization: Bearer mk_…`.
 *  `viaMeterKey` tells the proxy that `Authorization` is the provider's own credential. */
export function serviceKeyFromHeaders(headers: {
  authorization?: string | undefined;
  'x-meter-key'?: string | string[] | undefined;
}): { token: string; viaMeterKey: boolean } | undefined {
  const meterKey = headers['x-meter-key'];
  if (meterKey !== undefined) {
    return typeof meterKey === 'string' ? { token: meterKey.trim(), viaMeterKey: true } : undefined;
  }
  const auth = headers.authorization;
  if (auth === undefined || auth.length < 7 || !/^bearer /i.test(auth.slice(0, 7))) return undefined;
  return { token: auth.slice(7).trim(), viaMeterKey: false };
}

const SERVICE_KEY_SHAPE = /mk_[0-9a-f]{12}_/;

/** True when a header value holds something shaped like a service key (`mk_<12 hex>_`), in any
 *  place: such a value never goes upstream. Cheap when there is no `mk_` in it. */
export function carriesServiceKey(value: string): boolean {
  return value.includes(PREFIX) && SERVICE_KEY_SHAPE.test(value);
}
