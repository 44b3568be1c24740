import type { Queryable } from '../db/database.js';
import { operatorFarmsOf, type OperatorFarm } from './store.js';

export type { OperatorFarm };

/** What a signed-in wallet may open besides the customer dashboard. */
export interface WebRoles {
  admin: boolean;
  operatorFarms: OperatorFarm[];
}

export function isAdminWallet(adminWallets: readonly string[], wallet: string): boolean {
  return adminWallets.includes(wallet.toLowerCase());
}

export async function webRolesOf(db: Queryable, adminWallets: readonly string[], wallet: string): Promise<WebRoles> {
  return { admin: isAdminWallet(adminWallets, wallet), operatorFarms: await operatorFarmsOf(db, wallet) };
}
