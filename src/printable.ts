/**
 * Text that came from a caller (a tag value, a model name, a provider's or webhook's answer),
 * made safe to draw on a terminal: control characters (C0, DEL, C1), line and paragraph
 * separators and bidirectional overrides are shown as `\xNN` / `\uNNNN` escapes, so a key
 * holder can neither move the cursor, clear the screen, ring the bell nor forge a line.
 * Every string drawn by `meter top` and the CLI's tables and messages passes through here.
 */
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

const escape = (c: string): string => {
  const code = c.charCodeAt(0);
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16)}`;
};

export const printable = (text: string): string => text.replace(UNPRINTABLE, escape);
