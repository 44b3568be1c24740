/** Time-ordered, prefixed ids (`acct_01j…`): sortable, so keyset cursors can use them. */
export declare function newId(prefix: string): string;
