/**
 * What the owners of live calls have left, as the call meter needs it: the balance last read from
 * the database, less the charges of this process's calls that ended but are not yet committed. A
 * call's end lowers it at once (the meter then stops counting that call's running cost), its
 * commit moves the charge into the database figure, and a periodic read brings in everything else
 * (messages, operators, other processes). A read that overlapped a local charge or commit is
 * dropped, since it may or may not include it.
 */
export class OwnerBalances {
  private readonly owners = new Map<number, { stored: number; pending: number; version: number }>();

  /** Where the owner's figure stands before a read of their balance (for `know`). */
  versionOf(ownerId: number): number {
    return this.owners.get(ownerId)?.version ?? -1;
  }

  /**
   * The owner's balance as read at a call's start, `version` taken before the read: it replaces the
   * figure (a top-up since the last periodic read counts at once) unless a local charge or commit
   * moved it meanwhile, or another call's start became the first figure.
   */
  know(ownerId: number, balance: number, version: number): void {
    const owner = this.owners.get(ownerId);
    if (!owner) this.owners.set(ownerId, { stored: balance, pending: 0, version: 0 });
    else if (owner.version === version) {
      owner.stored = balance;
      // A periodic read under way began before this one: its older figure must not replace it.
      owner.version++;
    }
  }

  /** What the owner has left for running calls. */
  available(ownerId: number): number {
    const owner = this.owners.get(ownerId);
    return owner ? owner.stored - owner.pending : 0;
  }

  /** A call ended costing `amount`: taken off now, before its charge is written. */
  ended(ownerId: number, amount: number): void {
    const owner = this.owners.get(ownerId);
    if (!owner) return;
    owner.pending += amount;
    owner.version++;
  }

  /** That call's charge was committed (`charged` of `amount`, less when the balance ran out), or failed (0 charged). */
  committed(ownerId: number, amount: number, charged: number): void {
    const owner = this.owners.get(ownerId);
    if (!owner) return;
    owner.pending -= amount;
    owner.stored -= charged;
    owner.version++;
  }

  /** Starts a read of the database balances; apply the result with `refreshed`. */
  snapshot(): Map<number, number> {
    return new Map([...this.owners].map(([id, owner]) => [id, owner.version]));
  }

  refreshed(versions: Map<number, number>, balances: ReadonlyMap<number, number>): void {
    for (const [id, balance] of balances) {
      const owner = this.owners.get(id);
      if (owner && versions.get(id) === owner.version) owner.stored = balance;
    }
  }

  /** Owners whose calls are all over are forgotten. */
  retain(ownerIds: ReadonlySet<number>): void {
    for (const [id, owner] of this.owners) if (!ownerIds.has(id) && owner.pending === 0) this.owners.delete(id);
  }

  ids(): number[] {
    return [...this.owners.keys()];
  }
}
