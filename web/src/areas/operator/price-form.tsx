import { formatMicroUsd } from '@gpufarm/shared';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { anyAnswer, useApi } from '../../lib/api';
import { reasonOf } from '../../lib/errors';
import { usd } from '../../lib/format';

/**
 * A price per GPU-hour in USD (a decimal string the server parses to micro-USD), saved with a
 * PUT to `path`; "Remove price" sends null, which stops the machines being offered.
 */
export function PriceForm({ path, current, body, label = 'Price per GPU-hour (USD)' }: { path: string; current: number | null; body: (price: string | null) => unknown; label?: string }) {
  const api = useApi();
  const queryClient = useQueryClient();
  const [price, setPrice] = useState(current == null ? '' : formatMicroUsd(current));
  const save = useMutation({
    mutationFn: (value: string | null) => api.request({ method: 'PUT', path, body: body(value), schema: anyAnswer }),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: ['operator'] }),
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    save.mutate(price.trim() || null);
  };
  return (
    <form onSubmit={submit} className="filters">
      <label className="field">
        <span>{label}</span>
        <input value={price} onChange={(e) => setPrice(e.target.value)} inputMode="decimal" placeholder="0.50" />
      </label>
      <button type="submit" className="primary" disabled={save.isPending}>
        Save price
      </button>
      {current != null ? (
        <button type="button" onClick={() => save.mutate(null)} disabled={save.isPending}>
          Remove price
        </button>
      ) : null}
      <p className="muted">Now: {current == null ? 'no price (not offered)' : `${usd(current)} per GPU-hour`}</p>
      {save.isSuccess ? (
        <p className="tx tx-mined" role="status">
          Saved.
        </p>
      ) : null}
      {save.isError ? (
        <p className="tx tx-failed" role="alert">
          Could not save the price: {reasonOf(save.error)}
        </p>
      ) : null}
    </form>
  );
}
