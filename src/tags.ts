/** Tags as stored (a JSON object): only the string pairs, the ones the caller sent. A leaf:
 *  analytics and `meter top` read stored tags the same way. */
export function stringTags(stored: Record<string, unknown> | null): Record<string, string> {
  const tags: Record<string, string> = {};
  for (const [k, v] of Object.entries(stored ?? {})) if (typeof v === 'string') tags[k] = v;
  return tags;
}
