import { GpufarmError } from '@gpufarm/shared';

/** No capacity snapshot has loaded yet because the database cannot be reached; a later try may find one. */
export class CapacityUnavailable extends GpufarmError<'unavailable'> {
  constructor(cause: unknown) {
    super('unavailable', 'Capacity data is unavailable: the database cannot be reached. Retry later.', { cause, retryable: true });
  }
}
