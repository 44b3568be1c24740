import { ApiError, errorForField } from '@gpufarm/shared';
import type { Database } from '../db/database.js';
import { audited, type AuditActor } from '../fleet/audit.js';
import { addFarmOperator, removeFarmOperator } from './store.js';

/**
 * The wallets a farm lists as its operators (they run the farm beside its payout wallet). Who may
 * change the list (the payout wallet) is the caller's check; each change is audited.
 */

/** Lists `wallet` (lowercase) as an operator of the farm; false when it was listed already. */
export function addFarmOperatorWallet(db: Database, input: { farm: { id: string; slug: string; payoutAddress: string | null }; wallet: string; actor: AuditActor }): Promise<boolean> {
  const { farm, wallet } = input;
  if (wallet === farm.payoutAddress) throw errorForField('invalid_request', 'wallet', 'is the farm\'s payout wallet, which runs the farm already', { subject: true });
  return audited(db, { actor: input.actor, action: 'farm_operator.add', targetType: 'farm_operator', targetId: `${farm.id}/${wallet}`, details: () => ({ farm: farm.slug, wallet }) }, (tx) => addFarmOperator(tx, farm.id, wallet));
}

/** Removes `wallet` (lowercase) from the farm's operators; 404 `not_found` when it was none of them. */
export async function removeFarmOperatorWallet(db: Database, input: { farm: { id: string; slug: string }; wallet: string; actor: AuditActor }): Promise<void> {
  const { farm, wallet } = input;
  await audited(db, { actor: input.actor, action: 'farm_operator.remove', targetType: 'farm_operator', targetId: `${farm.id}/${wallet}`, details: () => ({ farm: farm.slug, wallet }) }, async (tx) => {
    if (!(await removeFarmOperator(tx, farm.id, wallet))) throw new ApiError('not_found', `The wallet ${wallet} is no operator of ${farm.slug}.`);
  });
}
