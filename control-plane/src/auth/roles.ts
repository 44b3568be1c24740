import type { Queryable } from '../db/database.js';

/** A farm a wallet may run from the operator area, and why: its payout wallet, or a listed operator. */
export interface OperatorFarm {
  id: string;
  slug: string;
  name: string;
  payoutAddress: string | null;
  role: 'payout' | 'operator';
}

/** What a signed-in wallet may open besides the customer dashboard. */
export interface WebRoles {
  admin: boolean;
  operatorFarms: OperatorFarm[];
}

export function isAdminWallet(adminWallets: readonly string[], wallet: string): boolean {
  return adminWallets.includes(wallet.toLowerCase());
}

/** The farms whose payout wallet this is or which list it as an operator, by slug. */
export async function operatorFarmsOf(db: Queryable, wallet: string): Promise<OperatorFarm[]> {
  const rows = await db.query<{ id: string; slug: string; name: string; payout_address: string | null; is_payout: boolean }>(
    `SELECT f.id, f.slug, f.name, f.payout_address, f.payout_address = $1 AS is_payout
       FROM farms f
      WHERE f.payout_address = $1 OR EXISTS (SELECT 1 FROM farm_operators o WHERE o.farm_id = f.id AND o.wallet_address = $1)
      ORDER BY f.slug`,
    [wallet.toLowerCase()],
  );
  return rows.map((row) => ({ id: row.id, slug: row.slug, name: row.name, payoutAddress: row.payout_address, role: row.is_payout ? 'payout' : 'operator' }));
}

export async function webRolesOf(db: Queryable, adminWallets: readonly string[], wallet: string): Promise<WebRoles> {
  return { admin: isAdminWallet(adminWallets, wallet), operatorFarms: await operatorFarmsOf(db, wallet) };
}
