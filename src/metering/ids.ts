import { randomFillSync } from 'node:crypto';

/** Random bytes drawn in blocks: one syscall per 256 ids instead of one per id. */
const POOL_IDS = 256;
const pool = Buffer.alloc(16 * POOL_IDS);
let poolAt = POOL_IDS;

let lastMs = 0;
let seq = 0;

/**
 * A UUIDv7 (RFC 9562): 48-bit Unix milliseconds, then 12 bits that count up within one
 * millisecond (ids of one process sort in creation order, which keeps the primary key's
 * index appends local), then 62 random bits.
 */
export function uuidv7(now = Date.now()): string {
  if (poolAt === POOL_IDS) {
    randomFillSync(pool);
    poolAt = 0;
  }
  const r = poolAt * 16;
  poolAt++;
  if (now > lastMs) {
    lastMs = now;
    seq = pool[r + 6]! & 0x07; // start low in the 12 bits so a millisecond has room for thousands of ids
  } else {
    now = lastMs; // a clock that stepped back must not break the order
    seq++;
    if (seq > 0xfff) {
      lastMs = ++now; // 4096 ids in one millisecond: borrow the next one
      seq = 0;
    }
  }
  // Written from a table of byte pairs: no Buffer and no hex string to cut per id.
  const high = Math.floor(now / 0x1000000); // the 48-bit time's upper and lower 24 bits
  const low = now % 0x1000000;
  return (
    HEX[high >>> 16]! +
    HEX[(high >>> 8) & 0xff]! +
    HEX[high & 0xff]! +
    HEX[low >>> 16]! +
    '-' +
    HEX[(low >>> 8) & 0xff]! +
    HEX[low & 0xff]! +
    '-' +
    HEX[0x70 | (seq >> 8)]! +
    HEX[seq & 0xff]! +
    '-' +
    HEX[0x80 | (pool[r + 8]! & 0x3f)]! +
    HEX[pool[r + 9]!]! +
    '-' +
    HEX[pool[r + 10]!]! +
    HEX[pool[r + 11]!]! +
    HEX[pool[r + 12]!]! +
    HEX[pool[r + 13]!]! +
    HEX[pool[r + 14]!]! +
    HEX[pool[r + 15]!]!
  );
}

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(s: string): boolean {
  return UUID_RE.test(s);
}
