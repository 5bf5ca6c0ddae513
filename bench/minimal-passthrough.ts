/**
 * The floors to compare against: the smallest Node + undici pass-through (no auth, no header
 * rules, no spool) that still reads each call's usage (a JSON body parsed whole; a stream's
 * usage event found in its last bytes), in its own process like the daemon. With
 * FLOOR_DATABASE_URL it is "the floor that writes": one row per call (time, key, model, tokens,
 * cost, tags) batch-inserted every 200 ms into its own table there, with a primary key and one
 * (account, time) index — the least a durable meter must do. Prints `meter listening on URL`.
 * Upstream origin from METER_UPSTREAM_OPENAI; `/proxy/openai/x` → `/v1/x`.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import pg from 'pg';
import { Pool } from 'undici';

const upstream = new URL(process.env.METER_UPSTREAM_OPENAI!);
const pool = new Pool(upstream.origin);
const TABLE = 'bench_floor_calls';
/** The stream's last bytes are kept: the usage event is the last but one. */
const TAIL_BYTES = 4096;
// gpt-4o-mini's list price per token, in USD.
const INPUT_PRICE = 0.15e-6;
const OUTPUT_PRICE = 0.6e-6;

interface Row {
  id: string;
  time: Date;
  key: string;
  model: string;
  input: number;
  output: number;
  cost: number;
  tags: string | null;
}

const rows: Row[] = [];
const db = process.env.FLOOR_DATABASE_URL
  ? new pg.Pool({ connectionString: process.env.FLOOR_DATABASE_URL, max: 1 })
  : undefined;
const account = process.env.FLOOR_ACCOUNT ?? 'bench';

interface Used {
  model?: string;
  usage?: { prompt_tokens?: number; completion_tokens?: number };
}

/** The usage of a JSON answer, or of a stream's last event that carries one. */
function usageOf(body: string, stream: boolean): Used | undefined {
  try {
    if (!stream) return JSON.parse(body) as Used;
    const at = body.lastIndexOf('"usage":{');
    if (at < 0) return undefined;
    const start = body.lastIndexOf('data: ', at) + 'data: '.length;
    return JSON.parse(body.slice(start, body.indexOf('\n', at))) as Used;
  } catch {
    return undefined;
  }
}

function record(req: IncomingMessage, time: Date, used: Used | undefined): void {
  if (!db) return;
  const input = used?.usage?.prompt_tokens ?? 0;
  const output = used?.usage?.completion_tokens ?? 0;
  const key = (req.headers.authorization ?? req.headers['x-meter-key'] ?? '') as string;
  const tags = req.headers['x-metering-tags'];
  rows.push({
    id: randomUUID(),
    time,
    key: key.slice(7, 22), // the key's public part (`Bearer mk_<id>`)
    model: used?.model ?? 'unknown',
    input,
    output,
    cost: input * INPUT_PRICE + output * OUTPUT_PRICE,
    tags:
      typeof tags === 'string' ? JSON.stringify(Object.fromEntries(tags.split(',').map((t) => t.split('=')))) : null,
  });
}

async function flush(): Promise<void> {
  const batch = rows.splice(0);
  if (batch.length === 0 || !db) return;
  await db.query({
    name: 'floor_insert',
    text: `INSERT INTO ${TABLE} (id, time, account, key, model, input_tokens, output_tokens, cost, tags)
           SELECT id, time, $1, key, model, input, output, cost, tags::jsonb
           FROM unnest($2::uuid[], $3::timestamptz[], $4::text[], $5::text[], $6::int[], $7::int[], $8::numeric[], $9::text[])
             AS t(id, time, key, model, input, output, cost, tags)`,
    values: [
      account,
      batch.map((r) => r.id),
      batch.map((r) => r.time),
      batch.map((r) => r.key),
      batch.map((r) => r.model),
      batch.map((r) => r.input),
      batch.map((r) => r.output),
      batch.map((r) => r.cost),
      batch.map((r) => r.tags),
    ],
  });
}

if (db) {
  // A new table each run: every run inserts into the same size of table.
  await db.query(`DROP TABLE IF EXISTS ${TABLE}`);
  await db.query(`CREATE TABLE ${TABLE} (
    id uuid PRIMARY KEY, time timestamptz NOT NULL, account text NOT NULL, key text NOT NULL,
    model text NOT NULL, input_tokens int NOT NULL, output_tokens int NOT NULL, cost numeric NOT NULL, tags jsonb)`);
  await db.query(`CREATE INDEX ${TABLE}_account_time ON ${TABLE} (account, time)`);
  // One batch at a time, every 200 ms (a batch that fails is dropped: this is a floor, not a meter).
  const tick = () =>
    void flush()
      .catch((err: Error) => process.stderr.write(`floor: insert failed: ${err.message}\n`))
      .finally(() => setTimeout(tick, 200));
  setTimeout(tick, 200);
}

const server = createServer((req, res) => {
  const time = new Date();
  const chunks: Buffer[] = [];
  let size = 0;
  let stream = false;
  // The client's bytes go out as they come; a copy is kept (a stream's: its last bytes) for the usage.
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      chunks.push(chunk);
      size += chunk.length;
      while (stream && size - chunks[0]!.length >= TAIL_BYTES) size -= chunks.shift()!.length;
      if (!res.write(chunk)) res.once('drain', done);
      else done();
    },
    final(done) {
      res.end();
      record(req, time, usageOf(Buffer.concat(chunks, size).toString('utf8'), stream));
      done();
    },
  });
  pool
    .stream(
      {
        path: `${upstream.pathname}/${req.url!.slice('/proxy/openai/'.length)}`,
        method: req.method!,
        headers: { 'content-type': 'application/json' },
        body: req,
      },
      ({ statusCode, headers }) => {
        delete headers.connection;
        delete headers['transfer-encoding'];
        stream = String(headers['content-type']).startsWith('text/event-stream');
        res.writeHead(statusCode, headers as Record<string, string>);
        return sink;
      },
    )
    .catch(() => res.destroy());
});
// As the daemon's: Node's default (5 s) closes the bench's idle connections between phases, and
// a call sent just as one closes fails the run with "other side closed".
server.keepAliveTimeout = 65_000;
server.listen(0, '127.0.0.1', () =>
  process.stdout.write(`meter listening on http://127.0.0.1:${(server.address() as AddressInfo).port}\n`),
);
process.once('SIGTERM', () => void flush().finally(() => process.exit(0)));
