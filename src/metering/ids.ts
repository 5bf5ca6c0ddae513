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
  const r = pool.subarray(poolAt * 16, poolAt * 16 + 16);
  poolAt++;
  if (now > lastMs) {
    lastMs = now;
    seq = r[6]! & 0x07; // start low in the 12 bits so a millisecond has room for thousands of ids
  } else {
    now = lastMs; // a clock that stepped back must not break the order
    seq++;
    if (seq > 0xfff) {
      lastMs = ++now; // 4096 ids in one millisecond: borrow the next one
      seq = 0;
    }
  }
  const b = Buffer.allocUnsafe(16);
  b.writeUIntBE(now, 0, 6);
  b[6] = 0x70 | (seq >> 8);
  b[7] = seq & 0xff;
  b[8] = 0x80 | (r[8]! & 0x3f);
  r.copy(b, 9, 9, 16);
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(s: string): boolean {
  return UUID_RE.test(s);
}
