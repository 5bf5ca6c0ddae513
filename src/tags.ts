/** Tags as stored (a JSON object): only the string pairs, the ones the caller sent. A leaf:
 *  analytics and `meter top` read stored tags the same way. */
export function stringTags(stored: Record<string, unknown> | null): Record<string, string> {
  const tags: Record<string, string> = {};
  for (const [k, v] of Object.entries(stored ?? {})) if (typeof v === 'string') tags[k] = v;
  return tags;
}

/** A tag key (CONTRACT §2): 1–64 of `[A-Za-z0-9_.-]`. */
export const TAG_KEY_RE = /^[A-Za-z0-9_.-]{1,64}$/;
