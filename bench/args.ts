/** The bench scripts' command line: `--name value` numbers and bare `--name` switches. */
const args = process.argv.slice(2);

export function numberFlag(name: string, fallback: number): number {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : fallback;
}

export const hasFlag = (name: string): boolean => args.includes(`--${name}`);

export function stringFlag(name: string): string | undefined {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : undefined;
}
