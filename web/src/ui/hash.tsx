import { shortHex } from '../lib/format';
import { CopyButton } from './copy-button';

/** A hash or address: shortened for reading, the whole value in the copy and for screen readers. */
export function Hash({ value, label, full = false }: { value: string; label: string; full?: boolean }) {
  return (
    <span className="hash">
      <code title={value} className={full ? 'hash-full' : undefined}>
        {full ? value : shortHex(value)}
      </code>
      {full ? null : <span className="visually-hidden">{value}</span>}
      <CopyButton text={value} label={`Copy ${label}`} />
    </span>
  );
}
