/** PostgreSQL text and jsonb cannot hold U+0000 (a tag value may be `%00`), nor a lone UTF-16
 *  surrogate (a model name from a provider's JSON may carry one, and the event goes to the
 *  database as JSON): the database would reject the event, so the character is replaced rather
 *  than the event dead-lettered. */
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const UNSTORABLE_ALL = new RegExp(UNSTORABLE.source, 'g');

/** true when `s` has a character PostgreSQL cannot store. */
export const hasUnstorable = (s: string): boolean => UNSTORABLE.test(s);

export const storable = (s: string): string => (UNSTORABLE.test(s) ? s.replace(UNSTORABLE_ALL, '\uFFFD') : s);

export function cleanTags(tags: Record<string, string>): Record<string, string> {
  for (const k in tags) {
    if (UNSTORABLE.test(tags[k]!)) return Object.fromEntries(Object.entries(tags).map(([k, x]) => [k, storable(x)]));
  }
  return tags;
}
