import { GpufarmError } from '@gpufarm/shared';

/** A command line the script cannot run: the message names the option to fix; the script prints its usage after it. */
export class UsageError extends GpufarmError<'usage'> {
  constructor(message: string) {
    super('usage', message);
  }
}
