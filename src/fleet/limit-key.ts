/**
 * What a fleet limit counts, and whose (docs/fleet.md). The database names a limit by its key
 * (`fleet_leases.limit_key`, and the advisory lock a lease statement takes): every sidecar of a
 * fleet must build the same key for the same limit, an old one as a new one (a fleet upgrades
 * one sidecar at a time), so the keys below never change form.
 */
export type FleetLimit =
  | { kind: 'calls-per-minute'; of: 'key' | 'account'; id: string }
  | { kind: 'tokens-per-minute'; of: 'key' | 'account'; id: string }
  | { kind: 'monthly-quota'; accountId: string }
  | { kind: 'budget'; budgetId: string };

/** The limit's key in the database: `rpm:key:<key id>`, `tpm:account:<account id>`,
 *  `quota:<account id>`, `budget:<budget id>`. */
export function limitKey(limit: FleetLimit): string {
  switch (limit.kind) {
    case 'calls-per-minute':
      return `rpm:${limit.of}:${limit.id}`;
    case 'tokens-per-minute':
      return `tpm:${limit.of}:${limit.id}`;
    case 'monthly-quota':
      return `quota:${limit.accountId}`;
    case 'budget':
      return `budget:${limit.budgetId}`;
  }
}
