import { useEffect, useRef, useState } from 'react';

/**
 * `value` once it has stayed the same (by its JSON) for `ms`: what a query keyed on a form's
 * fields should follow, so typing a price asks the server once, not at every keystroke. The
 * first value is settled at once.
 */
export function useSettled<T>(value: T, ms: number): T {
  const key = JSON.stringify(value);
  const latest = useRef(value);
  latest.current = value;
  const [settled, setSettled] = useState({ key, value });
  useEffect(() => {
    if (key === settled.key) return;
    const timer = setTimeout(() => setSettled({ key, value: latest.current }), ms);
    return () => clearTimeout(timer);
  }, [key, settled.key, ms]);
  return settled.value;
}
