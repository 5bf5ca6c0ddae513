/**
 * A non-streaming response body, kept on the side up to a bound so its usage can be read.
 * Past the bound (a large embeddings answer) memory stays flat: only the head (where the model
 * is) and a rolling tail (where every provider puts its usage object) are kept, and a small
 * body `{model, <usage key>: {…}}` is rebuilt from them for the provider's extractor.
 */

export const DEFAULT_MAX_JSON_BYTES = 2 << 20;
const HEAD_BYTES = 64 << 10;
const TAIL_BYTES = 256 << 10;

/** Response fields that hold usage (OpenAI-compatible, Anthropic, Cohere v2: usage; Gemini:
 *  usageMetadata; Cohere v1: meta) and the model (Gemini: modelVersion). */
const USAGE_KEYS = ['usage', 'usageMetadata', 'meta'];
const MODEL_KEYS = ['model', 'modelVersion'];

export class JsonCapture {
  private chunks: Buffer[] = [];
  private size = 0;
  private head: Buffer | undefined;
  private tail: Buffer[] = [];
  private tailSize = 0;
  private overflowed = false;

  constructor(private readonly maxBytes = DEFAULT_MAX_JSON_BYTES) {}

  push(chunk: Buffer): void {
    this.size += chunk.length;
    if (!this.overflowed) {
      this.chunks.push(chunk);
      if (this.size <= this.maxBytes) return;
      // Over the bound: keep the head, turn the rest into the rolling tail.
      this.overflowed = true;
      const all = Buffer.concat(this.chunks);
      this.chunks = [];
      this.head = Buffer.from(all.subarray(0, HEAD_BYTES));
      this.tail = [Buffer.from(all.subarray(Math.max(HEAD_BYTES, all.length - TAIL_BYTES)))];
      this.tailSize = this.tail[0]!.length;
      return;
    }
    this.tail.push(chunk);
    this.tailSize += chunk.length;
    while (this.tailSize - this.tail[0]!.length >= TAIL_BYTES) this.tailSize -= this.tail.shift()!.length;
  }

  get bytes(): number {
    return this.size;
  }

  /** The parsed body (or a rebuilt one past the bound); undefined when it is not JSON. */
  value(): unknown {
    if (!this.overflowed) {
      if (this.size === 0) return undefined;
      const text = (this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks)).toString('utf8');
      this.chunks = [];
      try {
        return JSON.parse(text);
      } catch {
        return undefined;
      }
    }
    return rebuild(this.head!.toString('utf8'), Buffer.concat(this.tail).toString('utf8'));
  }
}

function rebuild(head: string, tail: string): unknown {
  const out: Record<string, unknown> = {};
  for (const key of MODEL_KEYS) {
    const m = new RegExp(`"${key}"\\s*:\\s*"((?:[^"\\\\]|\\\\.)*)"`).exec(head) ?? lastStringValue(tail, key);
    if (m?.[1] !== undefined) {
      try {
        out[key] = JSON.parse(`"${m[1]}"`);
      } catch {
        /* not a usable string */
      }
    }
  }
  for (const key of USAGE_KEYS) {
    const value = lastObjectValue(tail, key);
    if (value !== undefined) out[key] = value;
  }
  return out;
}

function lastStringValue(text: string, key: string): RegExpExecArray | null {
  const re = new RegExp(`"${key}"\\s*:\\s*"((?:[^"\\\\]|\\\\.)*)"`, 'g');
  let last: RegExpExecArray | null = null;
  for (let m = re.exec(text); m; m = re.exec(text)) last = m;
  return last;
}

/** The last `"key": {…}` of the text whose object is complete in it, parsed. */
function lastObjectValue(text: string, key: string): unknown {
  const needle = `"${key}"`;
  for (let at = text.lastIndexOf(needle); at >= 0; at = text.lastIndexOf(needle, at - 1)) {
    let i = at + needle.length;
    while (/\s/.test(text[i] ?? '')) i++;
    if (text[i] !== ':') continue;
    i++;
    while (/\s/.test(text[i] ?? '')) i++;
    if (text[i] !== '{') continue;
    const end = objectEnd(text, i);
    if (end < 0) continue;
    try {
      return JSON.parse(text.slice(i, end + 1));
    } catch {
      continue;
    }
  }
  return undefined;
}

/** Index of the `}` closing the object that starts at `start`, strings skipped; -1 if cut off. */
function objectEnd(text: string, start: number): number {
  let depth = 0;
  for (let i = start; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      for (i++; i < text.length; i++) {
        const d = text.charCodeAt(i);
        if (d === 0x5c) i++;
        else if (d === 0x22) break;
      }
    } else if (c === 0x7b || c === 0x5b) depth++;
    else if (c === 0x7d || c === 0x5d) {
      depth--;
      if (depth === 0) return i;
    }
  }
  return -1;
}
