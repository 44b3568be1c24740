import { ulid } from 'ulid';

/** Time-ordered, prefixed ids (`acct_01j…`): sortable, so keyset cursors can use them. */
export function newId(prefix: string): string {
  return `${prefix}_${ulid().toLowerCase()}`;
}
